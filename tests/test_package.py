"""The package on its own: the wheel built from this checkout, installed with the `pulumi` extra into a fresh venv
outside the checkout (no system site-packages, no PYTHONPATH), runs `modelfleet init` in an empty directory with
no terminal and then `validate`, `plan`, `cost` and the offline `preview` there: the compiler, its data, the
Pulumi program and its components all come from the wheel, and no file of this checkout is read.

It installs from the package index as the generated PR workflow does (pip's cache makes a second run quick);
each stage's time is printed (pytest -s) for the record."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.package, pytest.mark.slow]  # the full tier: CI runs it (.ci/run)


def clean_env() -> dict[str, str]:
    """This machine's environment without anything that points Python at the checkout or the shared venv."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")
    return {k: v for k, v in os.environ.items() if k not in drop} | {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def timed(command: list[str], cwd: Path, label: str) -> subprocess.CompletedProcess:
    start = time.monotonic()
    result = subprocess.run(command, cwd=cwd, env=clean_env(), capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, check=False)
    print(f"{label}: {time.monotonic() - start:.1f} s")
    assert result.returncode == 0, f"{label} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv outside the checkout with the wheel and its pulumi extra; returns its bin directory."""
    base = tmp_path_factory.mktemp("package")
    timed([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base / "dist"), str(ROOT)], base,
          "wheel build")
    (wheel,) = (base / "dist").glob("modelfleet-*.whl")
    timed([sys.executable, "-m", "venv", str(base / "venv")], base, "venv")
    timed([str(base / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", f"{wheel}[pulumi]"], base,
          "install (wheel[pulumi])")
    return base / "venv" / "bin"


def test_the_installed_package_scaffolds_a_repository_that_validates_plans_costs_and_previews(installed, tmp_path):
    python, modelfleet = str(installed / "python"), str(installed / "modelfleet")
    code = ("import modelfleet, modelfleet.program, modelfleet.components as c, modelfleet.plan.llm.speed as s; "
            "print(modelfleet.__file__); print(c.__file__); print('compiled', s.compiled())")
    *where, compiled = timed([python, "-c", code], tmp_path, "import").stdout.splitlines()
    assert all(str(ROOT) not in line and str(installed.parent) in line for line in where)
    assert compiled == "compiled True", "the wheel's scheduler simulation is not the compiled one (setup.py)"
    assert timed([modelfleet, "--version"], tmp_path, "--version").stdout.startswith("modelfleet ")
    init = timed([modelfleet, "init", "fleet"], tmp_path, "init").stdout
    assert "region: us-east-1 (default, no terminal to ask; --region to choose)" in init
    fleet, start = tmp_path / "fleet", time.monotonic()
    assert "every stack compiles: dev, prod" in timed([modelfleet, "validate"], fleet, "validate").stdout
    for stack in ("dev", "prod"):
        timed([modelfleet, "plan", "--stack", stack], fleet, f"plan {stack}")
    assert "text-embedder" in timed([modelfleet, "cost"], fleet, "cost").stdout
    preview = timed([modelfleet, "preview", "--stack", "prod"], fleet, "preview prod").stdout
    assert "llama-3-1-8b-instruct" in preview
    timed([modelfleet, "codeowners", "--check", "--org", "my-org"], fleet, "codeowners --check")
    print(f"validate, plan, cost, preview, codeowners: {time.monotonic() - start:.1f} s")
