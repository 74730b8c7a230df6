"""MODELFLEET_REQUIRE_ENGINES turns engine skips into failures, so CI cannot pass without starting the engines.

Why a pytest run in a subprocess: the switch acts on collection and on test reports, which only a real
pytest session shows. The inner session loads this directory's hooks through a one-line conftest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.conftest import ROOT
from tests.engines.conftest import required_engines

pytestmark = pytest.mark.slow  # each test runs pytest itself in a subprocess

MISSING_ENGINE_MODULE = """
from tests.engines.conftest import engine_unavailable

engine_unavailable("triton", "tritonserver is not installed")


def test_never_runs():
    pass
"""

SKIPPING_TESTS = """
import pytest


@pytest.mark.engine("vllm")
def test_needs_vllm():
    pytest.importorskip("modelfleet_no_such_module")


@pytest.mark.engine
def test_needs_triton():
    pytest.skip("no tritonserver")


def test_not_an_engine_test():
    pytest.skip("unrelated skip stays a skip")


@pytest.mark.engine
@pytest.mark.xfail(reason="expected failures stay expected")
def test_expected_failure():
    raise AssertionError
"""


def session(tmp_path: Path, required: str) -> dict[str, str]:
    """Run the two files above under ``MODELFLEET_REQUIRE_ENGINES=required``; outcome per test (or module)."""
    (tmp_path / "conftest.py").write_text("from tests.engines.conftest import pytest_runtest_makereport  # noqa\n")
    (tmp_path / "test_missing_engine.py").write_text(MISSING_ENGINE_MODULE)
    (tmp_path / "test_skipping.py").write_text(SKIPPING_TESTS)
    report = tmp_path / "report.xml"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MODELFLEET_REQUIRE_ENGINES": required}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                    "-o", "markers=engine", "--continue-on-collection-errors", f"--junitxml={report}", str(tmp_path)],
                   capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    outcomes = {}
    for case in ElementTree.parse(report).iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        name = case.get("name") or case.get("classname", "").rsplit(".", 1)[-1]
        xfail = any(child.get("type") == "pytest.xfail" for child in case)
        outcomes[name] = "xfail" if xfail else (kinds[0] if kinds else "passed")
    return outcomes


def test_without_the_switch_missing_engines_skip(tmp_path: Path) -> None:
    outcomes = session(tmp_path, "")
    assert outcomes["test_missing_engine"] == "skipped"
    assert outcomes["test_needs_vllm"] == outcomes["test_needs_triton"] == "skipped"
    assert outcomes["test_not_an_engine_test"] == "skipped"
    assert outcomes["test_expected_failure"] == "xfail"


def test_required_engines_fail_instead_of_skipping(tmp_path: Path) -> None:
    outcomes = session(tmp_path, "triton")
    assert outcomes["test_missing_engine"] == "error"  # the module cannot even be collected
    assert outcomes["test_needs_triton"] == "failure"
    assert outcomes["test_needs_vllm"] == "skipped"  # not required in this run
    assert outcomes["test_not_an_engine_test"] == "skipped"
    assert outcomes["test_expected_failure"] == "xfail"


def test_all_means_every_engine(tmp_path: Path) -> None:
    outcomes = session(tmp_path, "1")
    assert outcomes["test_needs_vllm"] == outcomes["test_needs_triton"] == "failure"


@pytest.mark.parametrize(("value", "engines"), [
    ("", set()), ("0", set()), ("1", {"triton", "vllm"}), ("all", {"triton", "vllm"}),
    ("triton", {"triton"}), (" vllm , triton ", {"triton", "vllm"}),
])
def test_switch_values(value: str, engines: set[str]) -> None:
    assert required_engines(value) == engines


def test_unknown_engine_is_a_usage_error() -> None:
    with pytest.raises(pytest.UsageError, match="tensorrt"):
        required_engines("triton,tensorrt")
