"""Shared fixtures (the example project, its plans, the golden-file switch), the test tiers and the
Hypothesis profiles.

Tiers: ``pytest -q`` runs the default tier, the pure core, plans, renders, goldens and properties, in parallel
(pytest-xdist, ``-n auto`` in pyproject.toml), in a few minutes. Tests marked ``engine`` (a real tritonserver or
vLLM), ``judge`` (an external validator) or ``slow`` (end to end: the Pulumi program under mocks, the docs site,
built wheels, benchmarks) form the full tier, which ``pytest --full`` adds and CI runs (``.ci/run``). Naming test
files or directories runs what they hold, whatever its tier.

Hypothesis: the ``ci`` profile (chosen when ``CI`` is set, as ``.ci/run`` runs) is derandomized, so a CI run
never fails on an example a previous run did not try; ``dev`` explores new examples each run. Neither has a
deadline: timing on a shared 2-core machine is noise, not a property.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.project import Project

ROOT = Path(__file__).resolve().parent.parent
# The CLI keeps simulations on disk between commands (modelfleet/simcache.py): in tests, in a directory of this
# process's own (each xdist worker its own), removed at exit, never the user's ~/.cache.
os.environ["MODELFLEET_CACHE_DIR"] = tempfile.mkdtemp(prefix="modelfleet-test-cache-")
atexit.register(shutil.rmtree, os.environ["MODELFLEET_CACHE_DIR"], True)
STACKS = ("dev", "staging", "prod")
FULL_TIER = ("engine", "judge", "slow")

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True,
                          suppress_health_check=(HealthCheck.too_slow,))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true", default=False,
                     help="also run the full tier: real engines, external judges, end-to-end runs (CI runs it)")


def named_paths(config: pytest.Config) -> bool:
    """Whether the command named tests below tests/ (pytest-xdist passes its workers the test paths too, so the
    test root itself does not count as named)."""
    tests = (ROOT / "tests").resolve()
    return any(Path(arg.split("::")[0]).resolve() != tests for arg in config.option.file_or_dir or ())


@pytest.hookimpl(trylast=True)  # after the directories' conftests have marked their tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The default tier leaves out the full tier's tests, unless ``--full`` or paths were named."""
    if config.getoption("--full") or named_paths(config):
        return
    full = [item for item in items if any(item.get_closest_marker(m) for m in FULL_TIER)]
    if full:
        config.hook.pytest_deselected(items=full)
        chosen = set(map(id, full))
        items[:] = [item for item in items if id(item) not in chosen]


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if not (config.getoption("--full") or named_paths(config)):
        terminalreporter.write_line("default tier: the full tier (real engines, judges, end to end) was left out; "
                                    "`pytest --full` runs everything, as CI does")


def update_golden() -> bool:
    """Golden files are rewritten only when MODELFLEET_UPDATE_GOLDEN=1 is set explicitly."""
    return os.environ.get("MODELFLEET_UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="session")
def project() -> Project:
    return Project(root=str(ROOT))


@pytest.fixture(scope="session")
def catalogue():
    return load_instance_catalogue()


@pytest.fixture(scope="session")
def plans(project):
    return {stack: project.plan(stack) for stack in STACKS}
