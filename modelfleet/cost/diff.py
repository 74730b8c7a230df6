"""The cost difference between two sides (the base branch's inputs and the pull request's), per environment.

A side is models.yaml, the stack files and the price table; each can change in a pull request, and the
diff says which did what. Per environment: the stack itself (new, removed or on both sides), the monthly
totals, the change split by cause, and every model added, removed or changed with its monthly delta and
the reasons: the spec fields that changed, what the compiler decided differently (instance type,
replicas, sharding, server sharing) and node-hour price changes. A stack whose pull-request side does not
compile is reported with its located errors instead of figures. Pure: priced stacks in, a ``FleetDiff`` out.

Causes are attributed in a fixed order, each priced with the earlier ones already applied:
price table, then stack settings, then models.yaml. The last is the model changes at the head's prices
and settings, which is what the per-model rows show.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union

from ..errors import Issue
from ..plan.changes import version_change
from ..plan.compiler import models_in
from ..plan.types import FleetPlan, LlmEstimatesPlan, PlanModel, TritonModelPlan, VllmModelPlan
from .alternatives import find_alternatives, short
from .fleet import LEVELS, FleetCost, MonthlyUsd, NodeGroupCost, UnitCost
from .policy import BudgetStatus

if TYPE_CHECKING:
    from ..spec.models import FleetSpec
    from .policy import CostedPlan

CENT = 0.005  # deltas smaller than half a cent are rounding, not change
CAUSES = ("price table", "stack settings", "models.yaml")  # the attribution order (module docstring)
MAX_FIELDS = 4  # spec fields named per model; more are counted
CHEAPER_SHOWN = 2  # cheaper alternatives named per added or changed model (the PR comment stays short)
CHEAPER_MODELS = 20  # models whose alternatives are planned, the largest changes first (each takes ~50 ms)


@dataclass(frozen=True)
class StackFailure:
    """A stack that could not be compiled or priced: its located errors, each named by the stack."""

    stack: str
    issues: tuple[Issue, ...]

    def lines(self) -> tuple[str, ...]:
        return tuple(f"{self.stack}: {issue}" for issue in self.issues)


StackCost = Union["CostedPlan", StackFailure]


@dataclass(frozen=True)
class Step:
    """One of the head's inputs swapped into the base: its cause, what changed, the stack priced after it."""

    cause: str  # one of CAUSES
    details: tuple[str, ...]  # e.g. "modelfleet:capacityType: on-demand -> spot"
    priced: StackCost | None  # None: the stack does not exist at this step


@dataclass(frozen=True)
class StackSides:
    """One stack on both sides, and the steps from base to head (the last step's ``priced`` is the head)."""

    base: StackCost | None  # None: no such stack at the base
    head: StackCost | None  # None: the pull request removes the stack
    steps: tuple[Step, ...]


class ModelChange(PlanModel):
    name: str
    status: Literal["added", "removed", "changed"]
    before_usd: float | None  # desired replicas, per month; None: absent or unpriced
    after_usd: float | None
    delta_usd: float | None
    layout: str  # where it runs after the change (before, when removed)
    reasons: tuple[str, ...]
    unit_cost: UnitCost | None = None  # after the change
    estimates: LlmEstimatesPlan | None = None  # an LLM's predicted speed at peak, after the change
    edited: bool = False  # its spec in models.yaml changed (else it changed because of other models or inputs)
    # What would make it cheaper after the change, at most CHEAPER_SHOWN, the largest saving first
    # (cost/alternatives.py): "size.dtype: bf16 -> fp8: -7,828.04 USD/month"
    cheaper: tuple[str, ...] = ()


class TeamChange(PlanModel):
    """One team's monthly cost at desired replicas on both sides (its models' sum; None: absent or unknown)."""

    name: str
    before_usd: float | None
    after_usd: float | None
    delta_usd: float | None


class CostCause(PlanModel):
    cause: str  # "price table", "stack settings", "models.yaml", or several joined by " + " when a step between
    #             them could not be priced on its own
    details: tuple[str, ...]
    delta: MonthlyUsd | None  # None: a side it is measured between does not compile


class EnvironmentDiff(PlanModel):
    environment: str
    presence: Literal["both", "added", "removed"]  # the stack file: on both sides, new, or removed
    pricing: str  # how node-hours are priced on the head (the base, for a removed stack)
    before: MonthlyUsd | None  # None: unknown, or the base does not compile
    after: MonthlyUsd | None
    delta: MonthlyUsd | None  # an added stack counts from 0, a removed one down to 0
    causes: tuple[CostCause, ...]
    changes: tuple[ModelChange, ...]
    unchanged: int
    node_groups: tuple[str, ...]  # node count and price changes, with the arithmetic
    teams: tuple[TeamChange, ...] = ()  # teams whose cost changes (models.yaml's team), by name
    # A created cluster's own costs that change (its system node group, its EKS control plane), with the arithmetic.
    cluster: tuple[str, ...] = ()
    budget: BudgetStatus | None  # the head's
    violations: tuple[str, ...]  # the head's policy violations
    unknown: tuple[str, ...]
    errors: tuple[str, ...]  # the head does not compile: its located errors (then no figures after)
    base_errors: tuple[str, ...]  # the base does not compile (not the pull request's doing, but said)
    notes: tuple[str, ...]

    @property
    def failed(self) -> bool:
        return bool(self.errors)


class FleetDiff(PlanModel):
    base: str  # e.g. "main (models.yaml, stacks/, price table)"
    head: str
    sources: tuple[str, ...]  # where each side's models.yaml, stacks and prices came from
    environments: tuple[EnvironmentDiff, ...]
    assumptions: tuple[str, ...]
    # What the figures cannot show, said before them (e.g. the compiler itself changed since the base).
    caveats: tuple[str, ...] = ()

    @property
    def delta_desired(self) -> float | None:
        deltas = [e.delta.desired for e in self.environments if e.delta is not None]
        return None if len(deltas) != len(self.environments) else sum(deltas)


def compute_fleet_diff(stacks: Mapping[str, StackSides], base_label: str, head_label: str,
                       sources: tuple[str, ...] = (), caveats: tuple[str, ...] = ()) -> FleetDiff:
    """Diff every stack of either side; environments sorted by name."""
    envs = tuple(compute_environment_diff(name, stacks[name]) for name in sorted(stacks))
    priced = [side.cost for sides in stacks.values() for side in [sides.head if sides.head else sides.base]
              if _ok(side)]  # type: ignore[union-attr]
    return FleetDiff(base=base_label, head=head_label, sources=sources, environments=envs,
                     assumptions=_assumptions(priced), caveats=caveats)


def _ok(side: StackCost | None) -> bool:
    return side is not None and not isinstance(side, StackFailure)


def compute_environment_diff(name: str, sides: StackSides) -> EnvironmentDiff:
    base = sides.base if _ok(sides.base) else None
    head = sides.head if _ok(sides.head) else None
    presence = "added" if sides.base is None else "removed" if sides.head is None else "both"
    # Model and node-group changes need both sides priced (an absent side counts as empty).
    comparable = not isinstance(sides.base, StackFailure) and not isinstance(sides.head, StackFailure)
    changes, unchanged = _model_changes(name, base, head) if comparable else ((), 0)
    before, after = _total(sides.base), _total(sides.head)
    shown = head or base
    diff = EnvironmentDiff(
        environment=name, presence=presence, pricing=shown.cost.pricing if shown else "unknown",
        before=before, after=after, delta=_delta(before, after), causes=_causes(sides, presence),
        changes=changes, unchanged=unchanged, node_groups=_node_group_changes(base, head) if comparable else (),
        teams=team_changes(base.cost if base else None, head.cost if head else None) if comparable else (),
        cluster=_cluster_changes(base, head) if comparable else (),
        budget=head.budget if head else None, violations=tuple(str(i) for i in head.violations) if head else (),
        unknown=tuple(sorted({u for s in (base, head) if s for u in s.cost.unknown})),
        errors=_errors(sides.head), base_errors=_errors(sides.base), notes=())
    return diff.model_copy(update={"notes": _notes(diff)})


def team_changes(base: FleetCost | None, head: FleetCost | None) -> tuple[TeamChange, ...]:
    """Teams whose desired cost moves by a cent or more, or that appear or disappear."""
    def desired(cost: FleetCost | None) -> dict[str, float | None]:
        return {t.name: t.monthly_usd.desired if t.monthly_usd else None for t in (cost.teams if cost else ())}
    before, after = desired(base), desired(head)
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        delta = None if (name in before and b is None) or (name in after and a is None) else (a or 0.0) - (b or 0.0)
        if delta is None or abs(delta) >= CENT or (name in before) != (name in after):
            out.append(TeamChange(name=name, before_usd=b, after_usd=a, delta_usd=delta))
    return tuple(out)


def _total(side: StackCost | None) -> MonthlyUsd | None:
    if side is None:
        return MonthlyUsd(min=0.0, desired=0.0, max=0.0)  # the stack does not exist on this side
    return None if isinstance(side, StackFailure) else side.cost.monthly_usd


def _errors(side: StackCost | None) -> tuple[str, ...]:
    return side.lines() if isinstance(side, StackFailure) else ()


def _delta(before: MonthlyUsd | None, after: MonthlyUsd | None) -> MonthlyUsd | None:
    if before is None or after is None:
        return None
    return MonthlyUsd(**{lvl: after.at(lvl) - before.at(lvl) for lvl in LEVELS})


# ---------------------------------------------------------------------------------------------- causes
def _causes(sides: StackSides, presence: str) -> tuple[CostCause, ...]:
    """Each changed input's effect, priced step by step; a step that does not compile is merged into
    the next one (its effect cannot be told apart)."""
    if presence != "both":
        return ()
    out: list[CostCause] = []
    previous, pending = _total(sides.base), []
    for step in sides.steps:
        pending.append(step)
        current = _total(step.priced)
        if current is None and step is not sides.steps[-1]:
            continue
        out.append(CostCause(cause=" + ".join(s.cause for s in pending),
                             details=tuple(d for s in pending for d in s.details), delta=_delta(previous, current)))
        previous, pending = current, []
    return tuple(out)


def describe_config_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, ...]:
    """Stack config keys that differ, flattened: ``modelfleet:budget.monthlyUsd: 200000 -> 250000``."""
    flat0, flat1 = _flatten(before), _flatten(after)
    return tuple(f"{key}: {_show(flat0.get(key))} -> {_show(flat1.get(key))}"
                 for key in sorted(set(flat0) | set(flat1)) if flat0.get(key) != flat1.get(key))


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, Mapping) or not data:
        return {prefix: data} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


# ---------------------------------------------------------------------------------------------- models
def _model_changes(env: str, base: CostedPlan | None, head: CostedPlan | None) -> tuple[tuple[ModelChange, ...], int]:
    names0 = {m.name for m in base.plan.models} if base else set()
    names1 = {m.name for m in head.plan.models} if head else set()
    specs0, specs1 = _specs(base, env), _specs(head, env)
    changes, unchanged = [], 0
    for name in sorted(names0 | names1):
        if name not in names0:
            change = _added(name, head, "new stack" if base is None else "new model")  # type: ignore[arg-type]
        elif name not in names1:
            change = _removed(name, base, "stack removed" if head is None else "model removed")  # type: ignore[arg-type]
        else:
            change = _changed(name, base, head, specs0.get(name, {}), specs1.get(name, {}))  # type: ignore[arg-type]
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    changes.sort(key=lambda c: (-abs(c.delta_usd or 0.0), c.name))
    planned = set([c.name for c in changes if c.status != "removed"][:CHEAPER_MODELS]) if head else set()
    changes = [c.model_copy(update={"cheaper": cheaper_than(head, c.name)}) if c.name in planned else c  # type: ignore[arg-type]
               for c in changes]
    return tuple(changes), unchanged


def _specs(side: CostedPlan | None, env: str) -> dict[str, dict[str, Any]]:
    """Each model's spec as it runs in ``env`` (its environment patch applied), as plain data."""
    if side is None:
        return {}
    fleet: FleetSpec = side.fleet
    return {m.name: m.model_dump(mode="json", exclude={"environments"}) for _, m in models_in(fleet, env)}


def _usd(cost: FleetCost, name: str) -> float | None:
    monthly = cost.model(name).monthly_usd
    return None if monthly is None else monthly.desired


def _added(name: str, head: CostedPlan, reason: str) -> ModelChange:
    after = _usd(head.cost, name)
    return ModelChange(name=name, status="added", before_usd=None, after_usd=after, delta_usd=after,
                       layout=describe_layout(head.plan.model(name), head.plan), reasons=(reason,),
                       unit_cost=head.cost.model(name).unit_cost, estimates=head.cost.model(name).estimates)


def _removed(name: str, base: CostedPlan, reason: str) -> ModelChange:
    before = _usd(base.cost, name)
    return ModelChange(name=name, status="removed", before_usd=before, after_usd=None,
                       delta_usd=None if before is None else -before,
                       layout=describe_layout(base.plan.model(name), base.plan), reasons=(reason,))


def _changed(name: str, base: CostedPlan, head: CostedPlan, spec0: dict[str, Any],
             spec1: dict[str, Any]) -> ModelChange | None:
    before, after = _usd(base.cost, name), _usd(head.cost, name)
    delta = None if before is None or after is None else after - before
    m0, m1 = base.plan.model(name), head.plan.model(name)
    edits = describe_spec_changes(spec0, spec1)
    bump = version_change(name, base.plan, head.plan)
    reasons = (*((bump,) if bump else ()), *edits, *compute_reasons(m0, base.plan, m1, head.plan),
               *_price_reasons(m0, base.cost, m1, head.cost))
    if not reasons and delta is not None and abs(delta) >= CENT:
        reasons = (f"same layout; {m1.node_group} is shared differently (its other workloads or idle GPUs changed)",)
    if not reasons:
        return None
    return ModelChange(name=name, status="changed", before_usd=before, after_usd=after, delta_usd=delta,
                       layout=describe_layout(m1, head.plan), reasons=reasons, edited=bool(edits),
                       unit_cost=head.cost.model(name).unit_cost, estimates=head.cost.model(name).estimates)


def cheaper_than(head: CostedPlan, name: str) -> tuple[str, ...]:
    """The head's top cheaper alternatives of one model (none when the side kept no environment)."""
    if head.env is None or head.catalogue is None:
        return ()
    found = find_alternatives(head.fleet, head.env, head.catalogue, (name,))
    return tuple(short(a) for a in found[:CHEAPER_SHOWN])


def describe_spec_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, ...]:
    """The model's spec fields that differ, as models.yaml names them: ``sla.peak_concurrent_sequences 16 -> 400``."""
    flat0, flat1 = _flatten(before), _flatten(after)
    changed = [f"{key} {_show(flat0.get(key))} -> {_show(flat1.get(key))}"
               for key in sorted(set(flat0) | set(flat1)) if flat0.get(key) != flat1.get(key)]
    if len(changed) > MAX_FIELDS:
        changed = changed[:MAX_FIELDS - 1] + [f"and {len(changed) - MAX_FIELDS + 1} more spec fields"]
    return tuple(changed)


def _price_reasons(m0: TritonModelPlan | VllmModelPlan, cost0: FleetCost, m1: TritonModelPlan | VllmModelPlan,
                   cost1: FleetCost) -> tuple[str, ...]:
    """A node-hour price change on the same instance type (spot, a new price table, another ratio)."""
    if m0.instance_type != m1.instance_type:
        return ()
    g0, g1 = cost0.node_group(m0.node_group), cost1.node_group(m1.node_group)
    reasons = []
    if g0.usd_per_node_hour != g1.usd_per_node_hour:
        reasons.append(f"USD per node-hour {_price(g0.usd_per_node_hour)} ({g0.price_basis}) -> "
                       f"{_price(g1.usd_per_node_hour)} ({g1.price_basis})")
    if (g0.volume, g0.volume_usd_per_node_month) != (g1.volume, g1.volume_usd_per_node_month):
        reasons.append(f"each node's volume {g0.volume} ({_money(g0.volume_usd_per_node_month)} USD/month) -> "
                       f"{g1.volume} ({_money(g1.volume_usd_per_node_month)} USD/month)")
    return tuple(reasons)


def _price(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.8g}"


def _money(value: float | None) -> str:
    return "unknown" if value is None else usd(value)


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
    unit = f"{model.instance_type} node (KIND_CPU x {model.instance_count})" if model.device == "cpu" else (
        f"1 GPU on {model.instance_type}")
    return (f"{server.name}: {server.replicas} x {unit}{shared}, "
            f"replicas {server.min_replicas}-{server.replicas}-{server.max_replicas}")


def compute_reasons(m0: TritonModelPlan | VllmModelPlan, plan0: FleetPlan, m1: TritonModelPlan | VllmModelPlan,
                    plan1: FleetPlan) -> tuple[str, ...]:
    """What the compiler decided differently: instance type, replicas, sharding, server and its neighbours."""
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


# ---------------------------------------------------------------------------------------------- node groups
def _node_group_changes(base: CostedPlan | None, head: CostedPlan | None) -> tuple[str, ...]:
    """Node count and price changes with the arithmetic: nodes x USD per node-hour x 730 h."""
    c0 = {g.name: g for g in base.cost.node_groups} if base else {}
    c1 = {g.name: g for g in head.cost.node_groups} if head else {}
    changes = (_group_change(name, c0.get(name), c1.get(name)) for name in sorted(set(c0) | set(c1)))
    return tuple(c for c in changes if c)


def _group_change(label: str, a: NodeGroupCost | None, b: NodeGroupCost | None) -> str | None:
    """One group's node counts, price and volume before and after (None: absent), or None when none changed.
    The arithmetic: nodes at desired x (USD/h x 730 h + the node's EBS volume a month)."""
    sizes0, sizes1 = (a.nodes if a else (0, 0, 0)), (b.nodes if b else (0, 0, 0))
    p0, p1 = (a.usd_per_node_hour if a else None), (b.usd_per_node_hour if b else None)
    v0, v1 = (a.volume if a else None), (b.volume if b else None)
    e0, e1 = (a.volume_usd_per_node_month if a else None), (b.volume_usd_per_node_month if b else None)
    types = (a.instance_type if a else None, b.instance_type if b else None)
    if sizes0 == sizes1 and p0 == p1 and types[0] == types[1] and v0 == v1 and e0 == e1:
        return None
    one = a is None or b is None
    price = _price(p1 if b else p0) if (one or p0 == p1) else f"{_price(p0)} -> {_price(p1)}"
    ebs = _money(e1 if b else e0) if (one or e0 == e1) else f"{_money(e0)} -> {_money(e1)}"
    volume = "" if (one or v0 == v1) else f"; each node's volume {v0} -> {v1}"
    roll = "" if not volume or not sizes0[1] else (
        "; `pulumi up` replaces the group's running nodes to change it (a new launch template version: EKS "
        "drains them within their PodDisruptionBudgets)")
    instance = types[1] or types[0] if one or types[0] == types[1] else " -> ".join(types)
    m0, m1 = (a.usd_per_node_month if a else None), (b.usd_per_node_month if b else None)
    known = (m0 is not None or not sizes0[1]) and (m1 is not None or not sizes1[1])
    delta = "" if not known else f" = {usd(sizes1[1] * (m1 or 0.0) - sizes0[1] * (m0 or 0.0), True)} at desired"
    return (f"{label} ({instance}, {price} USD/h + EBS {ebs} USD/month per node{volume}): nodes "
            f"{'-'.join(map(str, sizes0))} -> {'-'.join(map(str, sizes1))} (min-desired-max){delta}{roll}")


def _cluster_changes(base: CostedPlan | None, head: CostedPlan | None) -> tuple[str, ...]:
    """The system node group and the EKS control plane, when the stack starts or stops creating its cluster
    or their prices (or the system instance type) change."""
    c0, c1 = (base.cost if base else None), (head.cost if head else None)
    system = _group_change("system nodes, on-demand", c0.system_nodes if c0 else None, c1.system_nodes if c1 else None)
    lines = [system] if system else []
    e0, e1 = _control_plane(c0), _control_plane(c1)
    if e0 != e1:
        known = all(e != "unknown" for e in (e0, e1))
        delta = f" ({usd(_control_usd(c1) - _control_usd(c0), True)})" if known else ""
        lines.append(f"EKS control plane: {e0} -> {e1} a month{delta}")
    return tuple(lines)


def _control_plane(cost: FleetCost | None) -> str:
    if cost is None or cost.system_nodes is None:  # the stack joins a cluster (system nodes come with creating one)
        return "not created"
    return "unknown" if cost.control_plane_monthly_usd is None else usd(cost.control_plane_monthly_usd)


def _control_usd(cost: FleetCost | None) -> float:
    return (cost.control_plane_monthly_usd or 0.0) if cost is not None else 0.0


# ---------------------------------------------------------------------------------------------- notes
def _notes(env: EnvironmentDiff) -> tuple[str, ...]:
    """What a reviewer could misread: cheaper at min or max although models were only added."""
    added = any(c.status == "added" for c in env.changes)
    only_added = added and all(c.status == "added" or (c.status == "changed" and not c.edited) for c in env.changes)
    if env.presence != "both" or not only_added or env.delta is None or any(
            c.cause != "models.yaml" for c in env.causes):
        return ()
    drops = [f"{lvl} replicas ({usd(env.delta.at(lvl), True)})" for lvl in ("min", "max")
             if env.delta.at(lvl) <= -CENT]
    if not drops:
        return ()
    return (f"cheaper at {' and at '.join(drops)} although models were only added: the compiler re-packed the "
            "others (see the node groups); only the cost at desired replicas never drops when a model is added",)


def usd(value: float, signed: bool = False) -> str:
    sign = ("+" if value > 0 else "-" if value < 0 else "") if signed else ("-" if value < 0 else "")
    return f"{sign}{abs(value):,.2f}"


def _assumptions(costs: list[FleetCost]) -> tuple[str, ...]:
    lines = {f"a month is {costs[0].hours_per_month:g} hours"} if costs else set()  # price dates: price_basis
    for cost in costs:
        lines.update(cost.price_basis)
        lines.add(cost.attribution_rule)
    return tuple(sorted(lines))
