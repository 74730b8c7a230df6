"""The program's body: stack config in, components out (kept here so __main__.py stays a few lines)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
from pulumi.runtime import config as runtime_config

from modelfleet.environment import EnvironmentSpec
from modelfleet.k8s import model_repository_bucket, model_repository_prefix
from modelfleet.plan import FleetPlan, VllmModelPlan

from .cluster import ClusterAccess
from .kubernetes import apply_objects
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


def _bucket(plan: FleetPlan, env: EnvironmentSpec) -> aws.s3.Bucket:
    protect = pulumi.ResourceOptions(protect=env.deploy.protect)
    bucket = aws.s3.Bucket("model-repository", bucket=model_repository_bucket(plan, env.deploy), opts=protect)
    aws.s3.BucketPublicAccessBlock("model-repository-private", bucket=bucket.id, block_public_acls=True,
                                   block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True)
    return bucket


def build_fleet(env: EnvironmentSpec, plan: FleetPlan, files: dict[str, bytes],
                manifests: dict[str, list[dict[str, Any]]], hf_token: pulumi.Output[str] | None) -> dict[str, str]:
    """Node groups, then cluster objects, Triton servers and vLLM models; returns endpoints by workload."""
    cluster = ClusterAccess("cluster", env)
    role = NodeRole("gpu-nodes")
    groups = [GpuNodeGroup(g, cluster.name, cluster.subnet_ids, role.arn, env.deploy) for g in plan.node_groups]
    shared = apply_objects(manifests["cluster"], cluster, cluster.provider, depends_on=[*groups])
    after = [*groups, *shared]
    endpoints: dict[str, str] = {}
    if plan.triton_servers:
        bucket = _bucket(plan, env)
        for server in plan.triton_servers:
            component = TritonServer(server, plan, files, bucket, model_repository_prefix(server), manifests[server.name],
                                     cluster.name, cluster.provider, pulumi.ResourceOptions(depends_on=after))
            endpoints[server.name] = component.endpoint
    for model in plan.models:
        if isinstance(model, VllmModelPlan) and model.serving == "vllm":
            component = VllmDeployment(model, plan, manifests[model.name], hf_token, cluster.provider,
                                       pulumi.ResourceOptions(depends_on=after))
            endpoints[model.name] = component.endpoint
    return endpoints
