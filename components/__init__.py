"""Thin Pulumi components built from plan types only: every decision was made by the compiler.

The only package (with __main__.py) that imports pulumi.
"""

from .cluster import ClusterAccess
from .kubernetes import KubernetesObject, apply_objects
from .model_repository import ModelRepository
from .node_group import GpuNodeGroup, NodeRole
from .triton_server import TritonServer
from .vllm_deployment import VllmDeployment

__all__ = ["ClusterAccess", "GpuNodeGroup", "KubernetesObject", "ModelRepository", "NodeRole", "TritonServer",
           "VllmDeployment", "apply_objects"]
