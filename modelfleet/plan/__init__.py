"""The plan stage (issue 11 moves the LLM compiler and the plan types in here).

Transitional, until that move reaches this branch: the plan types still live in ``modelfleet/plan.py``,
which this package shadows, so it is loaded here under its own name and re-exported unchanged.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

_PATH = pathlib.Path(__file__).resolve().parent.parent / "plan.py"
_SPEC = importlib.util.spec_from_file_location("modelfleet._plan_types", _PATH)
_TYPES = importlib.util.module_from_spec(_SPEC)
sys.modules["modelfleet._plan_types"] = _TYPES
_SPEC.loader.exec_module(_TYPES)
globals().update({name: value for name, value in vars(_TYPES).items() if not name.startswith("__")})
