"""Serving engines' command lines (vLLM, Triton) as the plan records them and the Deployments run them."""
