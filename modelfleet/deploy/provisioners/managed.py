"""EKS managed node groups, scaled by the cluster autoscaler (the default provisioner): each plan group as one node
group, or one per zone of a zonal layout (modelfleet/deploy/node_groups.py), and beside it:

- one node group per capacity reservation of its type, in the reservation's zone, whose launch template
  targets it (a Capacity Block also needs EC2's ``capacity-block`` market type and EKS's ``CAPACITY_BLOCK``
  capacity type): its nodes stay up (they are paid for whether they run anything or not), sized in whole
  replicas of the group's largest;
- on spot, an on-demand node group holding the availability floors (``on_demand_base_nodes``), always up;

with the plan group's own nodes reduced by what those hold. Every node carries the plan group's label, which
is what its pods select (render/k8s/common.py) once a group has such companions.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...plan.names import base_pool_name, reserved_group_name
from ...plan.teams import node_group_team
from ...plan.types import FleetPlan, NodeGroupPlan, ReservationPlan, ZoneSizePlan
from ...spec.environment import EnvironmentSpec
from ..node_groups import gpu_group, gpu_node_groups, zone_subnets
from ..types import LiveNodeGroup, LiveSubnet, NodeGroupDeploy
from .karpenter import replica_nodes


def _reserved(plan: FleetPlan, group: NodeGroupPlan, reservation: ReservationPlan, env: EnvironmentSpec,
              live: Sequence[LiveNodeGroup], subnets: Sequence[LiveSubnet], nodes: int) -> NodeGroupDeploy:
    name = reserved_group_name(group.name, reservation.id)
    ids = tuple(sorted(s.id for s in subnets if s.zone == reservation.zone))
    deployed = gpu_group(group, name, env, live, (nodes, nodes, max(nodes, reservation.count)), ids,
                         team=node_group_team(plan, group))
    block = reservation.kind == "capacity-block"
    template = deployed.launch_template.model_copy(update={"capacity_reservation_id": reservation.id,
                                                           "capacity_block": block})
    return deployed.model_copy(update={"capacity_type": "CAPACITY_BLOCK" if block else "ON_DEMAND",
                                       "launch_template": template, "plan_group": group.name})


def _base_groups(plan: FleetPlan, group: NodeGroupPlan, env: EnvironmentSpec, live: Sequence[LiveNodeGroup],
                 subnets: Sequence[LiveSubnet]) -> list[NodeGroupDeploy]:
    """On-demand nodes for the floors: one group, or in a zonal layout one per zone with a floor (its min)."""
    name, team = base_pool_name(group.name), node_group_team(plan, group)
    if not group.zonal:
        sizes = (group.on_demand_base_nodes,) * 3
        zones: list[tuple[str, tuple[str, ...], tuple[int, int, int], str | None]] = [
            (name, env.cluster.subnet_ids, sizes, None)]  # type: ignore[list-item]
    else:
        by_zone = zone_subnets(subnets)
        zones = [(f"{name}-{z.zone}", by_zone.get(z.zone, ()), (z.min_size,) * 3, z.zone)  # type: ignore[misc]
                 for z in group.zonal if z.min_size]
    return [gpu_group(group, n, env, live, sizes, ids, zone, team).model_copy(  # type: ignore[arg-type]
                update={"capacity_type": "ON_DEMAND", "plan_group": group.name})
            for n, ids, sizes, zone in zones]


def _reduced(group: NodeGroupPlan, held: int) -> NodeGroupPlan:
    """The plan group less ``held`` nodes (its companions'), its max at least 1 (EKS needs it)."""
    if not held:
        return group
    if group.zonal:  # the floors are the first zones' replicas: each zone keeps its share above its own floor
        zonal = tuple(ZoneSizePlan(zone=z.zone, min_size=0, desired_size=z.desired_size - z.min_size,
                                   max_size=z.max_size - z.min_size) for z in group.zonal
                      if z.max_size > z.min_size)  # a zone whose floor is its whole room needs no spot group
        return group.model_copy(update={"zonal": zonal})
    return group.model_copy(update={"min_size": max(0, group.min_size - held),
                                    "desired_size": max(0, group.desired_size - held),
                                    "max_size": max(1, group.max_size - held)})


def managed_groups(plan: FleetPlan, group: NodeGroupPlan, env: EnvironmentSpec, live: Sequence[LiveNodeGroup],
                   subnets: Sequence[LiveSubnet]) -> tuple[NodeGroupDeploy, ...]:
    """The plan group's EKS node groups: its reservations', its on-demand base, then its own (see the docstring)."""
    whole, left, extra = replica_nodes(plan, group), group.reserved_nodes, []
    for reservation in group.reservations:
        nodes = min(left, reservation.count) // whole * whole
        left -= nodes
        extra.append(_reserved(plan, group, reservation, env, live, subnets, nodes))
    base = group.on_demand_base_nodes
    if base:
        extra += _base_groups(plan, group, env, live, subnets)
    held = base + (group.reserved_nodes - left)
    return (*extra, *gpu_node_groups(plan, _reduced(group, held), env, live, subnets))
