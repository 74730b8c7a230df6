"""Every module of the package imports. The CLI imports its commands lazily, so a name one of them imports
and another module dropped (``profile --llm`` imported ``plan.llm.load_sequences`` after it was removed)
fails only when that command runs: here it fails at once, for every module, in the main environment."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import modelfleet

# __main__ runs the CLI when imported (python -m modelfleet); the CLI's own tests run it
MODULES = sorted(m.name for m in pkgutil.walk_packages(modelfleet.__path__, "modelfleet.") if m.name != "modelfleet.__main__")


def test_the_package_has_its_modules():
    assert len(MODULES) > 100 and "modelfleet.commands.profile_llm" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_every_module_imports(name: str) -> None:
    importlib.import_module(name)
