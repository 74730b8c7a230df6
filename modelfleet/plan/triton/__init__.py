"""Classic models on Triton: GPU and CPU sizing, queue policy, priorities, sequences, pipelines, warmup."""
