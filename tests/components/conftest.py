"""Each stack's program run once under mocks, shared by the component tests."""

from __future__ import annotations

import pytest

from tests.components.mocked import run
from tests.conftest import STACKS


@pytest.fixture(scope="session")
def runs():
    return {stack: run(stack) for stack in STACKS}
