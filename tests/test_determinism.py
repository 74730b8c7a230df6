"""The same input always gives byte-identical output; model order in models.yaml does not matter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from modelfleet.plan.compiler import compile_fleet
from modelfleet.render.fleet import render_fleet, write_tree
from modelfleet.spec.load import parse_fleet_text
from tests.conftest import ROOT, STACKS


def _render(text: str, project, catalogue, stack: str) -> dict[str, bytes]:
    fleet = parse_fleet_text(text, known_environments=STACKS)
    return render_fleet(compile_fleet(fleet, project.environment(stack), catalogue))


@pytest.mark.parametrize("stack", STACKS)
def test_render_twice_identical(project, catalogue, stack):
    text = (ROOT / "models.yaml").read_text()
    assert _render(text, project, catalogue, stack) == _render(text, project, catalogue, stack)


@pytest.mark.parametrize("stack", STACKS)
def test_reordering_models_changes_no_artifact(project, catalogue, stack):
    data = yaml.safe_load((ROOT / "models.yaml").read_text())
    original = _render(yaml.safe_dump(data), project, catalogue, stack)
    data["models"] = list(reversed(data["models"]))
    assert _render(yaml.safe_dump(data), project, catalogue, stack) == original


def test_write_tree_is_atomic_and_exact(tmp_path: Path, plans):
    out = tmp_path / "out"
    write_tree(render_fleet(plans["dev"]), str(out))  # what the previous render wrote and this one does not goes
    files = render_fleet(plans["prod"])
    write_tree(files, str(out))
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert written == set(files) | {".modelfleet-render"}
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".modelfleet-")]
