"""The program's body: stack config in, components out (kept here so __main__.py stays short)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from modelfleet.deploy.types import CLUSTER_READY, REPOSITORY_KEY, SHARED, SYSTEM_NODES, DeployPlan, node_group_key

from .cluster import ClusterAccess
from .karpenter import KarpenterNodes
from .kubernetes import apply_objects
from .model_repository import ModelRepository
from .node_group import CpuNodeGroup, GpuNodeGroup, NodeRole, SystemNodeGroup
from .prerequisites import ClusterPrerequisites
from .registry import Registry
from .tags import team_options
from .triton_server import TritonServer
from .vllm_deployment import VllmDeployment

HF_TOKEN_KEY = "modelfleet:hfToken"  # a Pulumi secret (`pulumi config set --secret hfToken`), not a setting


def read_stack_config() -> dict[str, Any]:
    """Every config key of the running stack but the secret, as the stack file has it: Pulumi hands a program
    every value as a string (``2`` as "2", ``true`` as "true", mappings and lists as JSON), and the
    environment's parser is strict about types, so each is decoded back."""
    values = {**(runtime_config.get_config_env() or {}), **runtime_config.CONFIG.get()}
    return {key: _decode(value) for key, value in values.items() if key != HF_TOKEN_KEY}


def _decode(value: Any) -> Any:
    """JSON where the string is JSON (numbers, booleans, mappings, lists); any other string is a string."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _node_groups(fleet: DeployPlan, cluster: ClusterAccess, registry: Registry) -> dict[str, GpuNodeGroup]:
    groups: dict[str, GpuNodeGroup] = {}
    if not fleet.node_groups and fleet.system_node_group is None:
        return groups  # Karpenter's nodes into a joined cluster: no managed group, no role for them
    role = NodeRole("gpu-nodes", fleet.node_role, team_options(SHARED))
    for spec in fleet.node_groups:  # in order: a zone's group comes after the one it waits for
        kind = CpuNodeGroup if spec.device == "cpu" else GpuNodeGroup
        groups[spec.name] = kind(spec, cluster.name, cluster.subnet_ids, role, team_options(spec.team),
                                 after=[groups[name].node_group for name in spec.after])
    for spec in fleet.node_groups:
        # a workload waits for its plan group: every zone's group of a zonal one
        registry.add(node_group_key(spec.plan_group or spec.name), groups[spec.name].node_group)
    if fleet.system_node_group is not None:
        system = SystemNodeGroup(fleet.system_node_group, cluster.name, cluster.subnet_ids, role,
                                 team_options(fleet.system_node_group.team))
        registry.add(SYSTEM_NODES, system.node_group)
    return groups


def build_fleet(fleet: DeployPlan, hf_token: pulumi.Output[str] | None) -> dict[str, Any]:
    """The cluster (and its prerequisites), node groups and every workload; returns the stack's outputs.
    Nothing waits on anything the deploy plan does not name (each object's ``waits_for``)."""
    registry = Registry()
    cluster = ClusterAccess("cluster", fleet.cluster, team_options(SHARED))
    registry.add(CLUSTER_READY, *cluster.ready)
    groups = _node_groups(fleet, cluster, registry)
    if fleet.releases:
        ClusterPrerequisites("prerequisites", fleet.releases, cluster.name, cluster.provider, registry,
                             team_options(SHARED))
    # after the releases: a created cluster's DCGM exporter ServiceMonitor waits for the Prometheus stack's CRD
    apply_objects(fleet.cluster_objects, cluster, cluster.provider, registry)
    if fleet.karpenter is not None:  # after the releases: a created cluster's NodePools wait for Karpenter's CRDs
        KarpenterNodes("karpenter", fleet.karpenter, cluster.name, cluster.provider, registry, team_options(SHARED))
    if fleet.repository is not None:
        bucket = ModelRepository(fleet.repository, team_options(SHARED)).bucket
        registry.add(REPOSITORY_KEY, bucket)
        for server in fleet.triton_servers:
            TritonServer(server, bucket, cluster.name, cluster.provider, registry, team_options(server.team))
    for model in fleet.vllm_models:
        VllmDeployment(model, hf_token, cluster.name, cluster.provider, registry, team_options(model.team))
    node_groups = {name: {**info, "eks_name": groups[name].node_group.node_group_name}
                   for name, info in fleet.outputs["node_groups"].items()}
    return {"cluster": cluster.name, **fleet.outputs, "node_groups": node_groups}
