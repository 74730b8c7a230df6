"""The cost difference between two fleets (the base branch's models.yaml and the pull request's), per
environment: models added, removed and changed, each with its monthly delta and the reasons (instance
type, replicas, sharding, server sharing). Pure: plans and costs in, a ``FleetDiff`` out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from .cost import LEVELS, FleetCost, MonthlyUsd, UnitCost
from .plan import FleetPlan, PlanModel, TritonModelPlan, VllmModelPlan
from .policy import BudgetStatus

CENT = 0.005  # deltas smaller than half a cent are rounding, not change


class ModelChange(PlanModel):
    name: str
    status: Literal["added", "removed", "changed"]
    before_usd: float | None  # desired replicas, per month; None: absent or unpriced
    after_usd: float | None
    delta_usd: float | None
    layout: str  # where it runs after the change (before, when removed)
    reasons: tuple[str, ...]
    unit_cost: UnitCost | None = None  # after the change


class EnvironmentDiff(PlanModel):
    environment: str
    before: MonthlyUsd | None
    after: MonthlyUsd | None
    delta: MonthlyUsd | None
    changes: tuple[ModelChange, ...]
    unchanged: int
    node_groups: tuple[str, ...]  # node count changes, e.g. "gpu-g6e-12xlarge-od (g6e.12xlarge): 4 -> 6 nodes"
    budget: BudgetStatus | None  # the head's
    violations: tuple[str, ...]  # the head's policy violations
    unknown: tuple[str, ...]


class FleetDiff(PlanModel):
    base: str  # e.g. "origin/main:models.yaml"
    head: str
    environments: tuple[EnvironmentDiff, ...]
    assumptions: tuple[str, ...]

    @property
    def delta_desired(self) -> float | None:
        deltas = [e.delta.desired for e in self.environments if e.delta is not None]
        return None if len(deltas) != len(self.environments) else sum(deltas)


Side = tuple[FleetPlan, FleetCost]


def compute_fleet_diff(base: Mapping[str, Side], head: Mapping[str, Side], budgets: Mapping[str, BudgetStatus | None],
                       violations: Mapping[str, tuple[str, ...]], base_label: str, head_label: str) -> FleetDiff:
    """Diff every environment present in ``head`` against the same environment of ``base``."""
    envs = tuple(compute_environment_diff(base[name], head[name], budgets.get(name), violations.get(name, ()))
                 for name in sorted(head))
    assumptions = _assumptions([cost for _, cost in head.values()])
    return FleetDiff(base=base_label, head=head_label, environments=envs, assumptions=assumptions)


def compute_environment_diff(base: Side, head: Side, budget: BudgetStatus | None,
                             violations: tuple[str, ...]) -> EnvironmentDiff:
    (plan0, cost0), (plan1, cost1) = base, head
    names0, names1 = {m.name for m in plan0.models}, {m.name for m in plan1.models}
    changes, unchanged = [], 0
    for name in sorted(names0 | names1):
        change = _model_change(name, plan0 if name in names0 else None, cost0,
                               plan1 if name in names1 else None, cost1)
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    changes.sort(key=lambda c: (-abs(c.delta_usd or 0.0), c.name))
    return EnvironmentDiff(
        environment=plan1.environment, before=cost0.monthly_usd, after=cost1.monthly_usd,
        delta=_delta(cost0.monthly_usd, cost1.monthly_usd), changes=tuple(changes), unchanged=unchanged,
        node_groups=_node_group_changes(base, head), budget=budget, violations=violations,
        unknown=tuple(sorted(set(cost0.unknown) | set(cost1.unknown))))


def _delta(before: MonthlyUsd | None, after: MonthlyUsd | None) -> MonthlyUsd | None:
    if before is None or after is None:
        return None
    return MonthlyUsd(**{lvl: after.at(lvl) - before.at(lvl) for lvl in LEVELS})


def _usd(cost: FleetCost, name: str) -> float | None:
    monthly = cost.model(name).monthly_usd
    return None if monthly is None else monthly.desired


def _model_change(name: str, plan0: FleetPlan | None, cost0: FleetCost, plan1: FleetPlan | None,
                  cost1: FleetCost) -> ModelChange | None:
    if plan0 is None and plan1 is not None:
        after = _usd(cost1, name)
        return ModelChange(name=name, status="added", before_usd=None, after_usd=after, delta_usd=after,
                           layout=describe_layout(plan1.model(name), plan1), reasons=("new model",),
                           unit_cost=cost1.model(name).unit_cost)
    if plan1 is None and plan0 is not None:
        before = _usd(cost0, name)
        return ModelChange(name=name, status="removed", before_usd=before, after_usd=None,
                           delta_usd=None if before is None else -before,
                           layout=describe_layout(plan0.model(name), plan0), reasons=("model removed",))
    assert plan0 is not None and plan1 is not None
    before, after = _usd(cost0, name), _usd(cost1, name)
    delta = None if before is None or after is None else after - before
    reasons = compute_reasons(plan0.model(name), plan0, plan1.model(name), plan1)
    if not reasons and delta is not None and abs(delta) >= CENT:
        reasons = (_resplit_reason(name, plan0, plan1),)
    if not reasons:
        return None
    return ModelChange(name=name, status="changed", before_usd=before, after_usd=after, delta_usd=delta,
                       layout=describe_layout(plan1.model(name), plan1), reasons=reasons,
                       unit_cost=cost1.model(name).unit_cost)


def describe_layout(model: TritonModelPlan | VllmModelPlan, plan: FleetPlan) -> str:
    """Where and how a model runs, in one phrase a reviewer can price by hand."""
    if isinstance(model, VllmModelPlan):
        nodes = f", {model.nodes_per_replica} nodes each" if model.nodes_per_replica > 1 else ""
        return (f"{model.replicas} x {model.gpus_per_replica} GPU on {model.instance_type} "
                f"(tp={model.tensor_parallel_size}, pp={model.pipeline_parallel_size}{nodes}), "
                f"replicas {model.min_replicas}-{model.replicas}-{model.max_replicas}")
    server = plan.server(model.server)
    others = [n for n in server.models if n != model.name]
    shared = f", shared with {', '.join(others)}" if others else ""
    return (f"{server.name}: {server.replicas} x 1 GPU on {model.instance_type}{shared}, "
            f"replicas {server.min_replicas}-{server.replicas}-{server.max_replicas}")


def compute_reasons(m0: TritonModelPlan | VllmModelPlan, plan0: FleetPlan, m1: TritonModelPlan | VllmModelPlan,
                    plan1: FleetPlan) -> tuple[str, ...]:
    """What changed in a model's layout: instance type, replicas, sharding, server and its neighbours."""
    reasons = []
    if m0.instance_type != m1.instance_type:
        reasons.append(f"instance type {m0.instance_type} -> {m1.instance_type}")
    r0, r1 = _replicas(m0, plan0), _replicas(m1, plan1)
    if r0 != r1:
        reasons.append(f"replicas {'-'.join(map(str, r0))} -> {'-'.join(map(str, r1))} (min-desired-max)")
    if isinstance(m0, VllmModelPlan) and isinstance(m1, VllmModelPlan):
        for label, attr in (("tensor parallel", "tensor_parallel_size"), ("pipeline parallel", "pipeline_parallel_size"),
                            ("max_num_seqs", "max_num_seqs")):
            if getattr(m0, attr) != getattr(m1, attr):
                reasons.append(f"{label} {getattr(m0, attr)} -> {getattr(m1, attr)}")
    elif isinstance(m0, TritonModelPlan) and isinstance(m1, TritonModelPlan):
        reasons += _triton_reasons(m0, plan0, m1, plan1)
    return tuple(reasons)


def _replicas(model: TritonModelPlan | VllmModelPlan, plan: FleetPlan) -> tuple[int, int, int]:
    if isinstance(model, TritonModelPlan):
        s = plan.server(model.server)
        return s.min_replicas, s.replicas, s.max_replicas
    return model.min_replicas, model.replicas, model.max_replicas


def _triton_reasons(m0: TritonModelPlan, plan0: FleetPlan, m1: TritonModelPlan, plan1: FleetPlan) -> list[str]:
    reasons = []
    mates0 = set(plan0.server(m0.server).models) - {m0.name}
    mates1 = set(plan1.server(m1.server).models) - {m1.name}
    if mates0 != mates1:
        joined, left = sorted(mates1 - mates0), sorted(mates0 - mates1)
        parts = ([f"now shares its GPU with {', '.join(joined)}"] if joined else []) + (
            [f"no longer with {', '.join(left)}"] if left else [])
        reasons.append("; ".join(parts))
    if round(m0.gpu_share, 3) != round(m1.gpu_share, 3):
        reasons.append(f"gpu_share {m0.gpu_share:.1%} -> {m1.gpu_share:.1%}")
    return reasons


def _resplit_reason(name: str, plan0: FleetPlan, plan1: FleetPlan) -> str:
    group = plan1.model(name).node_group
    return f"same layout; {group} is shared differently (its other workloads or idle GPUs changed)"


def _node_group_changes(side0: Side, side1: Side) -> tuple[str, ...]:
    """Node count changes with the arithmetic: nodes x USD per node-hour x 730 h."""
    (plan0, cost0), (plan1, cost1) = side0, side1
    g0, g1 = {g.name: g for g in plan0.node_groups}, {g.name: g for g in plan1.node_groups}
    c0, c1 = {g.name: g for g in cost0.node_groups}, {g.name: g for g in cost1.node_groups}
    out = []
    for name in sorted(set(g0) | set(g1)):
        a, b = g0.get(name), g1.get(name)
        sizes0 = (a.min_size, a.desired_size, a.max_size) if a else (0, 0, 0)
        sizes1 = (b.min_size, b.desired_size, b.max_size) if b else (0, 0, 0)
        if sizes0 == sizes1:
            continue
        price = (c1.get(name) or c0[name]).usd_per_node_hour
        priced = "unknown USD/h" if price is None else f"{price:.8g} USD/h"
        delta = "" if price is None else (f" = {usd((sizes1[1] - sizes0[1]) * price * cost1.hours_per_month, True)}"
                                          " at desired")
        out.append(f"{name} ({(b or a).instance_type}, {priced}): nodes "  # type: ignore[union-attr]
                   f"{'-'.join(map(str, sizes0))} -> {'-'.join(map(str, sizes1))} (min-desired-max){delta}")
    return tuple(out)


def usd(value: float, signed: bool = False) -> str:
    sign = ("+" if value > 0 else "-" if value < 0 else "") if signed else ("-" if value < 0 else "")
    return f"{sign}{abs(value):,.2f}"


def _assumptions(costs: list[FleetCost]) -> tuple[str, ...]:
    lines = {f"a month is {costs[0].hours_per_month:g} hours; prices as of {costs[0].prices_as_of}"} if costs else set()
    for cost in costs:
        lines.update(cost.price_basis)
        lines.add(cost.attribution_rule)
    return tuple(sorted(lines))
