"""Placing LLMs: layout search, memory fit, shape, precision, weights and the explanations of each choice."""
