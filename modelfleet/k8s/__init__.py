"""Kubernetes manifests as plain data, from the plan (pure: no pulumi, no I/O).

``modelfleet render`` writes exactly these objects, and the Pulumi components apply exactly these objects,
so what a reviewer reads is what runs.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..environment import DeploySettings
from ..plan import FleetPlan, VllmModelPlan
from .cluster import device_plugin, device_plugin_network_policy, namespace
from .triton import model_repository_prefix, triton_manifests
from .vllm import hf_secret_name, vllm_manifests

__all__ = ["fleet_manifests", "hf_secret_name", "model_repository_bucket", "model_repository_prefix",
           "render_kubernetes"]


def model_repository_bucket(plan: FleetPlan, deploy: DeploySettings) -> str:
    return deploy.model_repository_bucket or f"modelfleet-{plan.environment}-model-repository"


def fleet_manifests(plan: FleetPlan, deploy: DeploySettings) -> dict[str, list[dict[str, Any]]]:
    """Objects grouped by workload ("cluster", each Triton server, each vLLM model), in apply order."""
    cluster = [namespace(plan)]
    if deploy.ami_type == "AL2023_x86_64_NVIDIA" and plan.node_groups:
        cluster += [device_plugin(plan), device_plugin_network_policy()]
    groups: dict[str, list[dict[str, Any]]] = {"cluster": cluster}
    bucket = model_repository_bucket(plan, deploy)
    for server in plan.triton_servers:
        groups[server.name] = triton_manifests(server, plan, bucket, deploy.aws_cli_image)
    for model in plan.models:
        if isinstance(model, VllmModelPlan) and model.serving == "vllm":
            groups[model.name] = vllm_manifests(model, plan)
    return groups


def render_kubernetes(plan: FleetPlan, deploy: DeploySettings) -> dict[str, bytes]:
    """``kubernetes/<workload>.yaml``: one multi-document file per workload, keys sorted."""
    return {f"kubernetes/{name}.yaml": yaml.safe_dump_all(objects, sort_keys=True, default_flow_style=False).encode()
            for name, objects in sorted(fleet_manifests(plan, deploy).items())}
