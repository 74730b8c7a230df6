"""Running the real Pulumi program under mocks for a stack (or a changed copy of the project)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from modelfleet.preview import runner as preview_runner
from modelfleet.preview.runner import PreviewResult, Recorded, run_program
from tests.conftest import ROOT

TOKEN = "hf_very_secret_token"
SUBNETS = ["subnet-0a1b2c31", "subnet-1a2b3c42", "subnet-2a3b4c53"]  # in three zones (the mocks read a zone from the last digit)


def stack_config(stack: str, **changes: Any) -> dict[str, Any]:
    """The stack file's config, with ``changes`` (full keys, e.g. ``{"modelfleet:protect": True}``)."""
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {**config, **changes}


def run(stack: str, root: Path = ROOT, config: dict[str, Any] | None = None, token: str | None = TOKEN,
        live: list[dict[str, Any]] = (), clusters: list[str] | None = None, dry_run: bool = True,
        expect_error: bool = False, version: str = "1.33") -> PreviewResult:
    """The program for ``stack`` under mocks; ``live``: node groups EKS reports (``live_group``);
    ``clusters``: the EKS clusters that exist (a created cluster's second deploy); ``version``: the existing
    cluster's Kubernetes version."""
    secrets = {"modelfleet:hfToken": token} if token is not None else {}
    config = config if config is not None else stack_config(stack)
    # looked up when called: tests/hardening substitutes its own FleetMocks subclass
    mocks = preview_runner.FleetMocks(str(config.get("aws:region", "us-east-1")), live, clusters, version)
    result = run_program(str(root), stack, config, secrets, mocks=mocks, dry_run=dry_run)
    assert (result.error is not None) == expect_error, result.error
    return result


def live_group(name: str, stack: str, sizes: tuple[int, int, int], suffix: str = "20260701120000000000000001",
               **fields: Any) -> dict[str, Any]:
    """A node group as ``aws eks describe-nodegroup`` reports it (min, desired, max ``sizes``), created by
    ``stack`` for the planned group ``name``."""
    low, desired, high = sizes
    return {"nodeGroupName": f"{name}-{suffix}", "amiType": "AL2023_x86_64_NVIDIA", "capacityType": "ON_DEMAND",
            "instanceTypes": [fields.pop("instance_type", "g6e.xlarge")], "subnetIds": SUBNETS,
            "scalingConfigs": [{"minSize": low, "desiredSize": desired, "maxSize": high}],
            "tags": {"modelfleet.io/node-group": name, "modelfleet.io/stack": stack}, **fields}


def created_cluster(stack: str, **cluster: Any) -> dict[str, Any]:
    """The stack's config with ``cluster: {create: true}``, its subnets and a restricted endpoint."""
    settings = {"create": True, "name": "ml-prod", "subnetIds": SUBNETS, "publicAccessCidrs": ["203.0.113.0/24"], **cluster}
    return stack_config(stack, **{"modelfleet:cluster": settings})


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
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models, sort_keys=False))
    return tmp_path


def example_models() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "models.yaml").read_text())
