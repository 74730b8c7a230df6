"""The package's build (pyproject.toml holds its metadata): the LLM scheduler simulation compiled with mypyc.

The plan simulates vLLM's scheduler for every LLM layout it may choose (modelfleet/plan/llm/speed), and those
two modules are most of a plan's time. Compiled by mypyc (a C extension of each, beside its source) they run
about 2.4x faster and give the same figures to the bit: the same IEEE double operations in the same order
(tests/plan/test_native_simulator.py holds the two to equality). The extensions are optional: where mypyc or
a C compiler is missing, or MODELFLEET_PURE_PYTHON=1 is set, the same modules run as Python.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from setuptools import setup

SPEED = Path("modelfleet/plan/llm/speed")
STAMP = SPEED / "_native_sources.py"  # the digest of the sources built, that speed/__init__.py checks


def _native_sources():
    """speed/native_sources.py, loaded by its path (the package itself is not importable yet): the modules to
    compile and their digest, as speed/__init__.py computes it."""
    spec = importlib.util.spec_from_file_location("_modelfleet_native_sources", SPEED / "native_sources.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NATIVE_SOURCES = _native_sources()
SIMULATOR = [str(path) for path in NATIVE_SOURCES.source_paths(SPEED)]


def native_extensions() -> list:
    STAMP.unlink(missing_ok=True)
    if os.environ.get("MODELFLEET_PURE_PYTHON") == "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("note: mypyc not found: the scheduler simulation runs as Python", file=sys.stderr)
        return []
    try:
        extensions = mypycify(["--follow-imports=silent", *SIMULATOR], opt_level="3",
                              separate=[(SIMULATOR, "modelfleet.plan.llm.speed.simulator")])
    except (Exception, SystemExit) as error:  # mypyc's type check exits on an error
        print(f"note: mypyc could not compile the scheduler simulation ({error}): it runs as Python",
              file=sys.stderr)
        return []
    for extension in extensions:
        extension.optional = True  # a failed C build leaves the Python modules in charge
        # no fused multiply-adds (GCC fuses across statements where the CPU has them, as arm64 does): each
        # operation rounds as Python's does, so both give the same figures to the bit
        extension.extra_compile_args = [*extension.extra_compile_args, "-ffp-contract=off"]
    digest = NATIVE_SOURCES.sources_digest(SPEED)
    STAMP.write_text(f'"""Written by setup.py: the digest of the scheduler simulation\'s sources it compiled."""\n\n'
                     f'DIGEST = "{digest}"\n')
    return extensions


setup(ext_modules=native_extensions())
