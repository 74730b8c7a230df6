"""No import cycle hidden by import order (issue 29): every modelfleet module imports when it is the first one
imported, in a fresh set of modelfleet modules. A cycle that works in one order only (render/k8s importing
render/observability at the bottom of its ``__init__``, which broke whenever observability came first) fails
here for the module that comes first the wrong way."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # about 40 s: the package is imported anew for each of its 250 modules

SCRIPT = """
import importlib, pkgutil, sys
import modelfleet
names = sorted(m.name for m in pkgutil.walk_packages(modelfleet.__path__, "modelfleet.")
               if not m.name.endswith("__main__"))  # __main__ runs the CLI
failed = []
for name in names:
    for key in [k for k in sys.modules if k == "modelfleet" or k.startswith("modelfleet.")]:
        del sys.modules[key]
    try:
        importlib.import_module(name)
    except Exception as error:
        failed.append(f"{name}: {error!r}")
print(len(names))
print("\\n".join(failed))
"""


def test_every_module_imports_first():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    count, *failed = result.stdout.strip().split("\n")
    assert int(count) > 200 and failed == [], "\n".join(failed)
