"""Running the real Pulumi program under mocks for a stack (or a changed copy of the project)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from modelfleet.preview_runner import PreviewResult, Recorded, run_program
from tests.conftest import ROOT

TOKEN = "hf_very_secret_token"


def stack_config(stack: str, **changes: Any) -> dict[str, Any]:
    """The stack file's config, with ``changes`` (full keys, e.g. ``{"modelfleet:protect": True}``)."""
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {**config, **changes}


def run(stack: str, root: Path = ROOT, config: dict[str, Any] | None = None, token: str | None = TOKEN) -> PreviewResult:
    secrets = {"modelfleet:hfToken": token} if token is not None else {}
    result = run_program(str(root), stack, config if config is not None else stack_config(stack), secrets)
    assert result.error is None, result.error
    return result


def of_type(result: PreviewResult, token: str) -> dict[str, Recorded]:
    return {r.name: r for r in result.resources if r.type == token}


def k8s_objects(result: PreviewResult) -> dict[tuple[str, str], dict[str, Any]]:
    """Kubernetes objects the program applied, by (kind, name), as their inputs."""
    return {(r.inputs["kind"], r.inputs["metadata"]["name"]): r.inputs for r in result.resources
            if r.type.startswith("kubernetes:") and "kind" in r.inputs}


def copy_project(tmp_path: Path, models: dict[str, Any]) -> Path:
    """The project with another models.yaml: the same program, stacks and components."""
    for name in ("__main__.py", "Pulumi.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models, sort_keys=False))
    return tmp_path


def example_models() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "models.yaml").read_text())
