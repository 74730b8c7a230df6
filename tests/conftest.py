"""Shared fixtures: the example project, and the golden-file switch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.project import Project

ROOT = Path(__file__).resolve().parent.parent
STACKS = ("dev", "staging", "prod")


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
