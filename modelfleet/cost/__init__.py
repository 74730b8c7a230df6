"""Stage 3, what a plan costs: each node group and model priced from the dated price table
(``fleet.py``), the guardrails a stack sets on it (``policy.py``: budgets and policies), the difference
between two sides of a pull request split by cause (``diff.py``) and its text, markdown and JSON reports
(``report.py``). Imports only ``spec`` and ``plan``."""
