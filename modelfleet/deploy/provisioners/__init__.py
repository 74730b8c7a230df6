"""The provisioner seam: how a plan group's nodes come to exist, one module per way (``nodes.provisioner``).

``managed``: EKS managed node groups, scaled by the cluster autoscaler (managed.py). ``karpenter``: Karpenter
NodePools and EC2NodeClasses, with the node role and the spot interruption queue (karpenter.py). The plan
records the provisioner on every group (plan/capacity/provisioning.py); nothing else in the deploy stage names
one. Either way a group's pods select its nodes by the plan group's label (render/k8s/common.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ...plan.types import FleetPlan
from ...spec.environment import EnvironmentSpec
from ..types import KarpenterDeploy, LiveNodeGroup, LiveSubnet, NodeGroupDeploy
from .karpenter import karpenter_deploy
from .managed import managed_groups


class Provisioned(NamedTuple):
    node_groups: tuple[NodeGroupDeploy, ...]  # managed groups (none under Karpenter)
    karpenter: KarpenterDeploy | None


def provision(plan: FleetPlan, env: EnvironmentSpec, live: Sequence[LiveNodeGroup], subnets: Sequence[LiveSubnet],
              waits_for: tuple[str, ...]) -> Provisioned:
    """Every plan group's nodes as its provisioner creates them; ``waits_for``: what Karpenter's objects wait
    for (its CRDs: the release a created cluster installs)."""
    if env.nodes.provisioner == "karpenter":
        return Provisioned((), karpenter_deploy(plan, env, waits_for))
    return Provisioned(tuple(d for g in plan.node_groups for d in managed_groups(plan, g, env, live, subnets)), None)
