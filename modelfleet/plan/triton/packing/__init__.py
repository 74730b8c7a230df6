"""Packing classic models onto shared GPUs: the instance type choice, first-fit seeding, branch and bound."""
