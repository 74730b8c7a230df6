"""The hardware the compiler chooses from: the instance catalogue, dated prices, node prices and kubelet rules."""
