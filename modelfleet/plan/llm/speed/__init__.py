"""How fast an LLM replica serves: roofline step times, the calibration data, and the load at peak."""

# The scheduler simulation (replica.py, simulation.py, and steptime.py, the step time it calls) is most of a
# plan's time, so the build compiles it with mypyc where it can (setup.py): a C extension beside each source, which Python imports in its place. The
# compiled and the Python modules give the same figures to the bit (tests/plan/test_native_simulator.py). The
# build records its sources' digest (_native_sources.py); where the sources have changed since (an edit, a
# checkout), or MODELFLEET_PURE_PYTHON=1 is set, the Python modules are loaded instead, so an edit is never
# shadowed by a stale build (`pip install -e .` rebuilds it).

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path

from .native_sources import NATIVE
from .native_sources import sources_digest as _digest_of

_HERE = Path(__file__).parent


def sources_digest() -> str:
    """The SHA-256 of the compiled modules' sources, as setup.py records it at build time (native_sources.py)."""
    return _digest_of(_HERE)


def _built_digest() -> str | None:
    try:
        from ._native_sources import DIGEST
    except ImportError:
        return None
    return DIGEST


def _load_python_modules() -> None:
    for name in NATIVE:
        spec = importlib.util.spec_from_file_location(f"{__name__}.{name}", _HERE / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)


def choice(built: str | None, current: str, pure: str | None) -> str:
    """Which modules run: ``built`` the digest the build recorded (None: no native build), ``current`` the
    sources', ``pure`` the MODELFLEET_PURE_PYTHON setting."""
    if built is None:
        return "imported"  # no native build: the imports find the Python modules anyway
    if pure == "1":
        return "python"
    return "imported" if built == current else "python, with a warning"


def _choose() -> None:
    built = _built_digest()
    chosen = choice(built, sources_digest() if built is not None else "", os.environ.get("MODELFLEET_PURE_PYTHON"))
    if chosen.endswith("warning"):
        warnings.warn("the compiled scheduler simulation is older than its source: running the Python modules "
                      "(`pip install -e .` rebuilds it)", RuntimeWarning, stacklevel=2)
    if chosen != "imported":
        _load_python_modules()


def compiled() -> bool:
    """Whether the scheduler simulation in use (each of the NATIVE modules) is the compiled one."""
    from . import replica, simulation, steptime
    return not any((module.__file__ or "").endswith(".py") for module in (steptime, replica, simulation))


_choose()
