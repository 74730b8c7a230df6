"""What a canary costs (#15): the GPUs it runs beside the stable pods while a rollout is under way.

A canary is not a monthly cost at desired replicas: its extra replicas exist only during a rollout (its steps
times its pause, plus the pods' start), so it is priced per rollout, at desired replicas. The node group's
max holds its extra replicas above the HPA's max (plan/capacity/rollout.py), which the "max" cost already counts; the
month of those nodes is said too, as the most the room can cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..plan.changes import workloads
from ..plan.types import FleetPlan, PlanModel, RolloutPlan, TritonServerPlan, VllmModelPlan

if TYPE_CHECKING:  # fleet.py prices the canaries with this module
    from .fleet import NodeGroupCost

HOURS_PER_MONTH = 730.0


class CanaryCost(PlanModel):
    workload: str
    instance_type: str
    extra_replicas: int  # at desired replicas, at the canary's fullest step
    extra_gpus: int  # in ``unit``s: GPUs, or whole nodes for a KIND_CPU server
    unit: str = "GPU"  # "node" for a KIND_CPU server, whose replica holds a CPU node
    hours_per_rollout: float  # every step's pause
    usd_per_hour: float | None  # the extra GPUs' share of their nodes (None: no price)
    usd_per_rollout: float | None
    room_gpus_at_max: int  # the node group's room above the HPA's max
    room_usd_per_month: float | None  # that room held for a month (what the "max" level includes)


def _gpus(workload: TritonServerPlan | VllmModelPlan) -> int:
    """GPUs of one replica; a KIND_CPU server's replica holds a whole CPU node, counted as one unit of it."""
    return workload.gpus_per_replica or 1


def canary_cost(workload: TritonServerPlan | VllmModelPlan, rollout: RolloutPlan, group: NodeGroupCost,
                gpus_per_node: int) -> CanaryCost:
    per_gpu_hour = (None if group.usd_per_node_month is None else
                    group.usd_per_node_month / HOURS_PER_MONTH / max(1, gpus_per_node))
    extra = rollout.extra_replicas_desired * _gpus(workload)
    room = rollout.max_surge * _gpus(workload)
    hours = len([w for w in rollout.steps if w < 100]) * rollout.pause_s / 3600
    return CanaryCost(
        workload=workload.name, instance_type=workload.instance_type, extra_replicas=rollout.extra_replicas_desired,
        extra_gpus=extra, unit="GPU" if workload.gpus_per_replica else "node", hours_per_rollout=round(hours, 3),
        usd_per_hour=None if per_gpu_hour is None else round(extra * per_gpu_hour, 4),
        usd_per_rollout=None if per_gpu_hour is None else round(extra * per_gpu_hour * hours, 2),
        room_gpus_at_max=room,
        room_usd_per_month=None if per_gpu_hour is None else round(room * per_gpu_hour * HOURS_PER_MONTH, 2))


def canary_costs(plan: FleetPlan, groups: Mapping[str, NodeGroupCost]) -> tuple[CanaryCost, ...]:
    out = []
    for name in workloads(plan):
        workload = next((s for s in plan.triton_servers if s.name == name), None) or plan.model(name)
        rollout = workload.rollout
        if rollout is not None and rollout.strategy == "canary":
            group = plan.node_group(workload.node_group)
            out.append(canary_cost(workload, rollout, groups[group.name], group.gpus_per_node))
    return tuple(out)


def canary_text(c: CanaryCost) -> str:
    price = ("unpriced" if c.usd_per_rollout is None else
             f"{c.usd_per_hour:,.2f} USD/h, {c.usd_per_rollout:,.2f} USD per rollout of {c.hours_per_rollout:g} h")
    room = "" if c.room_usd_per_month is None else f" ({c.room_usd_per_month:,.2f} USD/month if held all month)"
    return (f"canary {c.workload}: +{c.extra_replicas} replica(s) = +{c.extra_gpus} {c.unit}(s) on {c.instance_type} "
            f"while it runs: {price}; the node group's max holds +{c.room_gpus_at_max} {c.unit}(s){room}, in the max "
            "figure")
