"""Thin Pulumi components that create what the deploy plan (``modelfleet.deploy``) lists: every decision
was made there.

The only package (with __main__.py) that imports pulumi; it imports nothing of modelfleet but the plan and
deploy-plan types (tests/components/test_layering.py).
"""

from .cluster import ClusterAccess
from .kubernetes import KubernetesObject, apply_objects
from .live import read_live_cluster, read_live_node_groups
from .model_repository import ModelRepository
from .node_group import CpuNodeGroup, GpuNodeGroup, NodeRole, SystemNodeGroup
from .prerequisites import ClusterPrerequisites
from .program import build_fleet, read_stack_config
from .triton_server import TritonServer
from .vllm_deployment import VllmDeployment

__all__ = ["ClusterAccess", "ClusterPrerequisites", "CpuNodeGroup", "GpuNodeGroup", "KubernetesObject",
           "ModelRepository", "NodeRole", "SystemNodeGroup", "TritonServer", "VllmDeployment", "apply_objects", "build_fleet", "read_live_cluster",
           "read_live_node_groups",
           "read_stack_config"]
