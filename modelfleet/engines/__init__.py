"""Real serving engines run locally (tritonserver from the nvidia-pytriton wheel, the ONNX python runner)."""
