"""Stable Kubernetes-safe names derived from model names (never from list positions)."""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^a-z0-9-]+")


def stable_name(prefix: str, name: str, limit: int = 63) -> str:
    """``prefix-name`` as a DNS-1123 label; too long -> truncated with an 8-hex hash of the full name."""
    full = _UNSAFE.sub("-", f"{prefix}-{name}".lower()).strip("-")
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[: limit - 9].rstrip('-')}-{digest}"


def node_group_name(instance_type: str, capacity_type: str, cpu: bool = False) -> str:
    """One node group per instance type and capacity type: ``gpu-g6e-12xlarge-od`` / ``...-spot``; a CPU
    group of KIND_CPU servers: ``cpu-c7i-xlarge-od``."""
    suffix = "spot" if capacity_type == "spot" else "od"
    return stable_name("cpu" if cpu else "gpu", f"{instance_type.replace('.', '-')}-{suffix}")


def karpenter_node_role_name(cluster: str, stack: str) -> str:
    """The IAM role of a Karpenter stack's nodes: fixed (its EC2NodeClasses name it), unique per cluster and
    stack, within IAM's 64 characters."""
    return stable_name(f"{cluster}-{stack}", "karpenter-node", 64)


def interruption_queue_name(cluster: str, stack: str) -> str:
    """The SQS queue Karpenter reads spot interruption warnings from (SQS: 80 characters)."""
    return stable_name(f"{cluster}-{stack}", "karpenter-interruptions", 80)


def base_pool_name(group: str) -> str:
    """A spot group's on-demand base: its own NodePool or managed node group beside the spot one."""
    return stable_name(group, "base")


def reserved_group_name(group: str, reservation_id: str) -> str:
    """A managed group's nodes in one capacity reservation (its launch template targets it)."""
    return stable_name(group, reservation_id.removeprefix("cr-")[-8:])
