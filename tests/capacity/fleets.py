"""The example project with capacity settings changed (a Karpenter stack, spot, reservations, scale to zero),
written to a temporary directory: the stack keeps its name, so models.yaml's per-environment patches apply."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from modelfleet.project import Project
from tests.conftest import ROOT

BLOCK = {"capacityBlockId": "cr-0123456789abcdef0", "instanceType": "g6e.12xlarge", "zone": "us-east-1b", "count": 1,
         "ends": "2026-12-15", "usdPerHour": 5.2}
KARPENTER = {"modelfleet:nodes": {"provisioner": "karpenter"}}
SCALE_TO_ZERO = {"modelfleet:replicas": {"singleReplica": True, "minimum": 0}}


def stack_config(stack: str, **changes: Any) -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {**config, **changes}


def project_with(tmp_path: Path, stack: str, changes: dict[str, Any]) -> Project:
    """A copy of the example project whose ``stack`` file has ``changes`` (full config keys)."""
    for name in ("__main__.py", "Pulumi.yaml", "models.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks", dirs_exist_ok=True)
    shutil.copytree(ROOT / "samples", tmp_path / "samples", dirs_exist_ok=True)  # warmup samples models.yaml names
    path = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": stack_config(stack, **changes)}, sort_keys=False))
    return Project(root=str(tmp_path))
