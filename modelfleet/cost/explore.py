"""The cost/latency frontier of one model: what each p99 target costs, at each precision or device and batch size.

Pure. Nothing here plans or prices on its own: every point is the model planned alone (``compile_fleet`` on a
fleet of that one model, with its stack's settings) and priced by ``compute_fleet_cost``, exactly as ``plan``
and ``cost`` would for that models.yaml entry. A point is what the planner chose, with the figures it
predicted, so a change of the planner's timing (a simulated scheduler, a measured profile) moves the frontier
with it. The variations:

- LLM: one series per precision (the checkpoint's own, fp8 weights where vLLM can quantize the checkpoint
  while loading, an fp8 KV cache, both); instance type, layout (tp/pp/ep) and replicas are the planner's own
  search at each target. Along a series the p99 TTFT target descends: each plan's predicted p99 TTFT, less
  ``LLM_STEP``, is the next target, so every step buys a faster plan and the series ends where no plan meets
  the target (or after ``MAX_STEPS``; a plan pinned to its replicas that misses its targets ends it
  too). TPOT stays the declared target, or the one ``tpot_ms`` gives.
- classic: one series per device choice (the planner's, and a forced GPU or CPU where the model has a
  measured CPU profile) and per pinned batch size; each is planned at ``CLASSIC_TARGETS`` p99 targets
  spread geometrically around the declared one. A Triton plan meets its p99 by its queue timeout, so a
  point's latency is its target: the worst case the plan admits.

Alone: on its own nodes, sharing no Triton server (``plan``'s fleet may pack it with others for less), and
without the load of the pipelines it is a step of (the basis says so). Points a stack policy forbids (an
instance family) are left out: ``render`` would refuse them. The frontier is the points no other point beats
on both cost and latency (cost, then latency, then series name decide ties).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import CompileError, Issue
from ..plan.compiler import models_in
from ..plan.hardware.instances import InstanceCatalogue
from ..plan.llm.precision import fp8_weights_possible, weights_changes
from ..plan.types import PlanModel, TritonModelPlan, VllmModelPlan
from ..spec.environment import EnvironmentSpec
from ..spec.load import with_fields
from ..spec.models import ClassicModelSpec, FleetSpec, LlmModelSpec
from ..spec.values import MAX_LATENCY_MS
from .alone import price_alone
from .policy import check_policies

LLM_STEP = 0.03  # the next target: 3% below the last plan's p99 TTFT (a finer step finds near-equal plans)
MAX_STEPS = 40  # plans per LLM series at most: enough for a 40-replica range, seconds in all
LOOSEST = 10.0  # series start at 10x the declared target (looser plans are rarely wanted, and cost no less)
CLASSIC_TARGETS = 24  # p99 targets per classic series, from 1/10 to 10x the declared one
CLASSIC_BATCHES = (1, 8, 32)  # pinned max_batch_size series beside the planner's own choice

Model = ClassicModelSpec | LlmModelSpec


class ExplorePoint(PlanModel):
    """One plan of the model: the target it was planned for, what the planner predicted, what it costs."""

    series: str  # e.g. "bf16", "fp8 weights", "fp8 KV cache", "gpu, batch 8"
    changes: tuple[tuple[str, Any], ...]  # the models.yaml fields that give this series (dotted path, value)
    sla_p99_ms: float  # the target planned for: sla.p99_ttft_ms (LLM) or sla.p99_latency_ms (classic)
    p99_ms: float  # predicted p99 TTFT at peak (LLM); the worst case the plan admits, its target (classic)
    tpot_ms: float | None  # predicted TPOT at peak (LLM)
    monthly_usd: float  # the model's desired-replica cost, as `cost` reports it
    instance_type: str
    layout: str  # "tp=1 pp=1, 2 replica(s)" or "batch 8, 1 GPU x2 replica(s)"
    frontier: bool = False


class Exploration(PlanModel):
    model: str
    environment: str
    kind: str  # "llm" | "classic"
    latency: str  # what the latency axis is
    sla_p99_ms: float  # the declared target
    current: ExplorePoint | None  # the declared entry planned alone (None: it does not compile alone)
    points: tuple[ExplorePoint, ...]  # every plan found, by series then target (frontier ones flagged)
    basis: tuple[str, ...]  # what the figures rest on
    left_out: int  # plans a stack policy forbids

    @property
    def frontier(self) -> tuple[ExplorePoint, ...]:
        """The frontier by latency, one point per (latency, cost): of equal plans, the tightest target."""
        ordered = sorted((p for p in self.points if p.frontier),
                         key=lambda p: (p.p99_ms, p.monthly_usd, p.sla_p99_ms, p.series))
        seen: set[tuple[float, float]] = set()
        out = []
        for p in ordered:
            if (p.p99_ms, p.monthly_usd) not in seen:
                seen.add((p.p99_ms, p.monthly_usd))
                out.append(p)
        return tuple(out)


def plan_alone(model: Model, env: EnvironmentSpec, catalogue: InstanceCatalogue
               ) -> tuple[TritonModelPlan | VllmModelPlan, float] | None:
    """The model planned on its own and its monthly cost at desired replicas; None when it does not compile,
    a price is unknown, or a stack policy forbids the plan (``render`` would refuse it)."""
    alone = price_alone(model, env, catalogue)
    if alone is None or check_policies(alone.plan, alone.cost, alone.fleet, env):
        return None
    return alone.planned, alone.monthly_usd


def explore_model(fleet: FleetSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue, name: str,
                  tpot_ms: float | None = None) -> Exploration:
    """The frontier of ``name`` as it runs in ``env`` (its environment patch applied); an LLM's at ``tpot_ms``
    instead of its declared p99 TPOT when given (the current plan stays the declared entry's)."""
    served = {m.name: m for _, m in models_in(fleet, env.name)}
    if name not in served:
        raise CompileError([Issue("", 0, 0, name, f"{name} is not served in {env.name} (environments: {{{env.name}: "
                                  "{enabled: false}})", "explore it in a stack that serves it")])
    model = served[name]
    steps = {s.model for p in fleet.pipelines for s in p.steps}
    plans: dict[tuple, ExplorePoint | None] = {}

    def point(series: str, changes: tuple[tuple[str, Any], ...], target: float) -> ExplorePoint | None:
        key = (changes, target)
        if key not in plans:
            plans[key] = _point(model, env, catalogue, series, changes, target)
        return plans[key]
    if isinstance(model, LlmModelSpec):
        points, declared = list(_llm_points(model, point, tpot_ms)), model.sla.p99_ttft_ms
        latency = "predicted p99 TTFT at peak (ms)"
    else:
        points, declared = list(_classic_points(model, point)), model.sla.p99_latency_ms
        latency = "p99 latency the plan guarantees (its target, ms)"
    current = point(_own_series(model), (), declared)
    all_points = _flag_frontier([*points, *([current] if current else [])])
    basis = _basis(model, env, catalogue, name in steps, tpot_ms)
    mine = next((p for p in all_points if current and (p.series, p.sla_p99_ms) == (current.series, declared)), None)
    return Exploration(model=name, environment=env.name, kind="llm" if isinstance(model, LlmModelSpec) else "classic",
                       latency=latency, sla_p99_ms=declared, current=mine, points=tuple(all_points), basis=basis,
                       left_out=sum(1 for v in plans.values() if v is None))


def _point(model: Model, env: EnvironmentSpec, catalogue: InstanceCatalogue, series: str,
           changes: tuple[tuple[str, Any], ...], target: float) -> ExplorePoint | None:
    field = "sla.p99_ttft_ms" if isinstance(model, LlmModelSpec) else "sla.p99_latency_ms"
    try:
        spec = with_fields(model, (*changes, (field, target)))
    except ValueError:  # pydantic's ValidationError: a target the model's own bounds refuse
        return None
    found = plan_alone(spec, env, catalogue)
    if found is None:
        return None
    planned, monthly = found
    if isinstance(planned, VllmModelPlan):
        layout = (f"tp={planned.tensor_parallel_size} pp={planned.pipeline_parallel_size}, "
                  f"{planned.replicas} replica(s)")
        return ExplorePoint(series=series, changes=changes, sla_p99_ms=target, p99_ms=planned.estimated_ttft_ms,
                            tpot_ms=planned.estimates.tpot_ms if planned.estimates else None, monthly_usd=monthly,
                            instance_type=planned.instance_type, layout=layout)
    layout = (f"{planned.device}, batch {planned.max_batch_size}, {planned.instance_count} instance(s) x "
              f"{planned.replicas} replica(s)")
    return ExplorePoint(series=series, changes=changes, sla_p99_ms=target, p99_ms=target, tpot_ms=None,
                        monthly_usd=monthly, instance_type=planned.instance_type, layout=layout)


Pointer = Callable[[str, tuple[tuple[str, Any], ...], float], ExplorePoint | None]


def llm_series(model: LlmModelSpec) -> list[tuple[str, tuple[tuple[str, Any], ...]]]:
    """(name, models.yaml changes) of each precision to explore: the declared one first."""
    own = _own_series(model)
    out: list[tuple[str, tuple[tuple[str, Any], ...]]] = [(own, ())]
    fp8_kv = model.overrides.kv_cache_dtype != "fp8"
    if fp8_weights_possible(model):
        out.append(("fp8 weights", weights_changes(model, "fp8")))
    if fp8_kv:
        out.append((f"{own} + fp8 KV cache", (("overrides.kv_cache_dtype", "fp8"),)))
    if fp8_kv and fp8_weights_possible(model):
        out.append(("fp8 weights + fp8 KV cache", (*weights_changes(model, "fp8"), ("overrides.kv_cache_dtype", "fp8"))))
    return out


def _own_series(model: Model) -> str:
    if isinstance(model, LlmModelSpec):
        return f"{model.size.dtype or 'bf16'}" + (" (precision: auto)" if model.precision is not None else "") + (
            " + fp8 KV cache" if model.overrides.kv_cache_dtype == "fp8" else "")
    return "as declared"


def _llm_points(model: LlmModelSpec, point: Pointer, tpot_ms: float | None) -> Iterator[ExplorePoint]:
    tpot = (("sla.p99_tpot_ms", tpot_ms),) if tpot_ms is not None else ()
    limit = tpot_ms if tpot_ms is not None else model.sla.p99_tpot_ms

    def meeting(found: ExplorePoint | None) -> ExplorePoint | None:
        """The plan, when it meets its targets (a pinned or single replica can miss them: then it is no step)."""
        misses = found is not None and (found.p99_ms > found.sla_p99_ms or (
            limit is not None and found.tpot_ms is not None and found.tpot_ms > limit))
        return None if misses else found
    for own, own_changes in llm_series(model):
        series, changes = own + (f", TPOT {tpot_ms:g} ms" if tpot else ""), (*tpot, *own_changes)
        target = min(MAX_LATENCY_MS, model.sla.p99_ttft_ms * LOOSEST)
        for _ in range(MAX_STEPS):
            found = meeting(point(series, changes, target))
            if found is None:
                break
            yield _tightest(found, meeting(point(series, changes, math.ceil(found.p99_ms))))
            target = math.floor(found.p99_ms * (1 - LLM_STEP))
            if target < 1:
                break


def _tightest(found: ExplorePoint, at_own: ExplorePoint | None) -> ExplorePoint:
    """The plan at the target its own p99 rounds up to, when that costs the same: the SLA a person would write
    for it (a tighter target leaves the planner fewer plans, so none cheaper; equal cost keeps it)."""
    return at_own if at_own is not None and at_own.monthly_usd == found.monthly_usd else found


def classic_series(model: ClassicModelSpec) -> list[tuple[str, tuple[tuple[str, Any], ...]]]:
    out: list[tuple[str, tuple[tuple[str, Any], ...]]] = [("as declared", ())]
    if model.profile.cpu is not None and model.device is None:
        out += [("gpu", (("device", "gpu"),)), ("cpu", (("device", "cpu"),))]
    if model.overrides.max_batch_size is None and model.stateful is None:
        out += [(f"batch {b}", (("overrides.max_batch_size", b),)) for b in CLASSIC_BATCHES]
    return out


def _classic_points(model: ClassicModelSpec, point: Pointer) -> Iterator[ExplorePoint]:
    declared = model.sla.p99_latency_ms
    targets = sorted({_round_ms(declared * 10 ** (2 * i / (CLASSIC_TARGETS - 1) - 1)) for i in range(CLASSIC_TARGETS)}
                     | {declared})
    for series, changes in classic_series(model):
        for target in targets:
            found = point(series, changes, target)
            if found is not None:
                yield found


def _round_ms(ms: float) -> float:
    """Two significant figures, at least 1 ms: targets a person would write."""
    if ms < 1:
        return 1.0
    digits = 1 - math.floor(math.log10(ms))
    return float(round(ms, digits))


def _flag_frontier(points: list[ExplorePoint]) -> list[ExplorePoint]:
    """Each point, flagged when no other is at most as dear and as slow and better on one (equal plans, the same
    cost and latency at different targets, do not beat each other: all are flagged)."""
    unique = {(p.series, p.sla_p99_ms): p for p in points}.values()
    ordered = sorted(unique, key=lambda p: (p.monthly_usd, p.p99_ms, p.series, p.sla_p99_ms))
    best, last = math.inf, (math.nan, math.nan)
    flagged = []
    for p in ordered:
        on = p.p99_ms < best or (p.monthly_usd, p.p99_ms) == last
        if on:
            best, last = p.p99_ms, (p.monthly_usd, p.p99_ms)
        flagged.append(p.model_copy(update={"frontier": on}))
    return sorted(flagged, key=lambda p: (p.series, -p.sla_p99_ms))


def _basis(model: Model, env: EnvironmentSpec, catalogue: InstanceCatalogue, step: bool,
           tpot_ms: float | None) -> tuple[str, ...]:
    out = [f"each point: the model planned alone in {env.name} ({env.region}, {env.capacity_type}; prices as of "
           f"{catalogue.as_of}) and priced at desired replicas as `modelfleet cost` prices it (node-hours x 730 "
           "plus the nodes' EBS volumes)",
           "alone: on its own nodes; `plan` may pack it with other models for less"]
    if isinstance(model, LlmModelSpec):
        tpot = (f"{tpot_ms:g} ms (--tpot-ms; the current plan keeps the declared one)" if tpot_ms is not None else
                f"{model.sla.p99_tpot_ms:g} ms as declared" if model.sla.p99_tpot_ms else "unbounded as declared")
        out.append(f"instance type, layout and replicas: the planner's search at each p99 TTFT target, TPOT {tpot}")
        out.append("precision: quality is the model owner's call (fp8 weights and an fp8 KV cache change outputs)")
    if step:
        out.append("a pipeline step: the pipelines' own load is not included")
    return tuple(out)
