"""Each stack's program run once under mocks, shared by the component tests."""

from __future__ import annotations

import pytest

from tests.components.mocked import run
from tests.conftest import STACKS


@pytest.fixture(scope="session")
def runs():
    return {stack: run(stack) for stack in STACKS}


def pytest_collection_modifyitems(items):
    """Every component test runs the Pulumi program under mocks (seconds each): the full tier (tests/conftest.py),
    except the pure diff of two recorded runs."""
    for item in items:
        if "tests/components/" in item.nodeid and "test_preview_diff.py" not in item.nodeid:
            item.add_marker(pytest.mark.slow)
