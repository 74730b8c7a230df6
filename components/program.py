"""The program's body: stack config in, components out (kept here so __main__.py stays a few lines)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from modelfleet.k8s import (CLUSTER, from_hub, model_repository_bucket, node_disk_gib, repository_objects, vllm_models,
                            workload_endpoints)
from modelfleet.project import Deployment

from .cluster import ClusterAccess
from .kubernetes import apply_objects
from .model_repository import ModelRepository
from .node_group import GpuNodeGroup, NodeRole
from .triton_server import TritonServer
from .vllm_deployment import VllmDeployment

HF_TOKEN_KEY = "modelfleet:hfToken"  # a Pulumi secret (`pulumi config set --secret hfToken`), not a setting


def read_stack_config() -> dict[str, Any]:
    """Every config key of the running stack but the secret, structured values decoded (Pulumi passes
    them as JSON strings): the same keys the CLI reads from the stack file."""
    values = {**(runtime_config.get_config_env() or {}), **runtime_config.CONFIG.get()}
    return {key: _decode(value) for key, value in values.items() if key != HF_TOKEN_KEY}


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def build_fleet(deployment: Deployment, hf_token: pulumi.Output[str] | None) -> dict[str, Any]:
    """Node groups, then the cluster-wide objects, then every workload; returns the stack's outputs."""
    env, plan, files, manifests = deployment.env, deployment.plan, deployment.files, deployment.manifests
    for warning in plan.warnings:
        pulumi.log.warn(f"{warning.model}: {warning.message}")
    cluster = ClusterAccess("cluster", env)
    role = NodeRole("gpu-nodes")
    groups = {g.name: GpuNodeGroup(g, cluster.name, cluster.subnet_ids, role, env.deploy.ami_type,
                                   node_disk_gib(plan, g.name, env.deploy.node_disk_gib), env.protect)
              for g in plan.node_groups}
    after = [*groups.values(), *apply_objects(manifests[CLUSTER], cluster, cluster.provider,
                                              depends_on=[*groups.values(), *cluster.ready])]
    outputs: dict[str, Any] = {"cluster": cluster.name, "endpoints": workload_endpoints(plan)}
    if plan.triton_servers:
        repository = ModelRepository("model-repository", model_repository_bucket(plan, env.deploy), env.protect)
        outputs["model_repository"] = repository.bucket.bucket
        for server in plan.triton_servers:
            TritonServer(plan, server, repository_objects(files, server), manifests[server.name], repository.bucket,
                         cluster.name, cluster.provider, after)
    if hf_token is None and any(from_hub(m) for m in vllm_models(plan)):
        pulumi.log.warn("modelfleet:hfToken is not set: gated Hugging Face models will fail to download "
                        "(pulumi config set --secret modelfleet:hfToken hf_...)")
    for model in vllm_models(plan):
        VllmDeployment(plan, model, manifests[model.name], hf_token, cluster.name, cluster.provider, after)
    outputs["node_groups"] = {g.name: {"eks_name": groups[g.name].node_group.node_group_name, "max": g.max_size,
                                       "instance_type": g.instance_type, "min": g.min_size, "desired": g.desired_size}
                              for g in plan.node_groups}
    return outputs
