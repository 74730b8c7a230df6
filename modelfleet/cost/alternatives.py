"""What would make a model's plan cheaper, with the figure: each is one models.yaml change, planned and priced.

Pure. For every model of a plan, a few single changes are planned alone and priced as ``cost`` prices them
(cost/explore.py's ``plan_alone``) against the entry as declared, planned alone the same way (so the saving
compares like with like; ``plan`` may pack a Triton model with others for less). A change is named when it
saves at least ``MIN_SAVING_USD`` a month, the largest saving first:

- a precision the model allows (LLM): fp8 weights, where vLLM quantizes the 16-bit checkpoint while loading,
  an fp8 KV cache, and both; quality is the model owner's call, and the line says so;
- the smallest SLA relaxation on ``RELAXATIONS`` that saves: the p99 TTFT (LLM) or p99 latency (classic),
  and the TPOT where one is declared; the loosest is tried first, and when it saves nothing the tighter ones
  are not (a looser target never costs more: the planner's search at it can pick anything it picked before);
- a different traffic assumption: the peak load ``LOWER_LOAD`` lower (the figure a load test might find).

Cost: an LLM change whose every layout's floor (search.may_serve_within: sized, and the replicas its
throughput needs at least, before any simulation) costs no less than the declared entry's own plan at the
planner's ranking price is dropped without simulating it: the planner cannot pick anything cheaper for it.
Only a change that may save is planned alone and priced in full, exactly as ``plan`` would plan it.
"""

from __future__ import annotations

from typing import Any

from ..errors import Issue

from ..plan.compiler import models_in
from ..plan.hardware.instances import InstanceCatalogue
from ..plan.llm.precision import fp8_weights_possible, weights_changes
from ..plan.llm.precision_choice import choose_precision
from ..plan.llm.search import may_serve_within
from ..plan.forked import can_fork, forked_pool, shared
from ..plan.types import PlanModel, VllmModelPlan
from ..spec.environment import EnvironmentSpec
from ..spec.load import with_fields
from ..spec.models import ClassicModelSpec, FleetSpec, LlmModelSpec
from .explore import Model, plan_alone

MIN_SAVING_USD = 1.0  # a month: below it a change is rounding, not a saving
RELAXATIONS = (1.25, 1.5, 2.0, 3.0)  # SLA targets tried, as multiples of the declared one, smallest first
LOWER_LOAD = 0.75  # the traffic assumption tried: a quarter below the declared peak
STRICTLY_BELOW = 1e-6  # the bound's margin under the declared entry's own cost (far above search's 1e-9 slack)
QUALITY = "quality at a lower precision is the model owner's call"
Changes = tuple[tuple[str, Any], ...]


class PlanAlternative(PlanModel):
    model: str
    kind: str  # "precision" | "sla" | "traffic"
    change: str  # as models.yaml would say it: "size.dtype: bf16 -> fp8"
    changes: tuple[tuple[str, Any], ...]  # the fields (dotted path, value) that make it
    monthly_saving_usd: float
    monthly_usd: float  # the model planned alone with the change, desired replicas
    baseline_monthly_usd: float  # the model planned alone as declared
    result: str  # what the planner would then do: "g6e.xlarge x2, p99 TTFT 960 ms"
    note: str  # what the change gives up


def find_alternatives(fleet: FleetSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                      names: tuple[str, ...] | None = None, workers: int = 1) -> tuple[PlanAlternative, ...]:
    """The cheaper alternatives of each model (of ``names``, default all) as it runs in ``env``, by model, then
    the largest saving first. ``workers`` > 1: the models' alternatives are planned in that many forked
    processes (each a pure function of its model; a fork inherits the simulations memoised so far), collected in
    the models' order, so the result is the same as one process's."""
    models = [model for _, model in models_in(fleet, env.name) if names is None or model.name in names]
    workers = min(workers, len(models))
    if not can_fork(workers):
        return tuple(a for model in models for a in alternatives_of(model, env, catalogue))
    # the dearest first (LLMs simulate), each handed out alone: the slowest does not end up last in a batch
    order = sorted(range(len(models)), key=lambda i: (not isinstance(models[i], LlmModelSpec), i))
    with forked_pool((models, env, catalogue), workers) as pool:
        found = pool.map(_alternatives_at, order, chunksize=1)
    by_index = dict(zip(order, found))
    return tuple(a for i in range(len(models)) for a in by_index[i])


def _alternatives_at(index: int) -> list[PlanAlternative]:
    models, env, catalogue = shared()
    return alternatives_of(models[index], env, catalogue)


def alternatives_of(model: Model, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> list[PlanAlternative]:
    baseline = plan_alone(model, env, catalogue)
    if baseline is None:
        return []
    ceiling = _ranking_usd(model, env, catalogue)
    found: list[PlanAlternative] = []
    for kind, change, changes, note in _precision_options(model):
        priced = _priced(model, env, catalogue, baseline[1], ceiling, kind, change, changes, note)
        if "(both)" in change and priced and priced[0].monthly_saving_usd < max(
                (a.monthly_saving_usd for a in found), default=0.0) + MIN_SAVING_USD:
            continue  # both together save no more than one of them alone
        found += priced
    for options in _sla_options(model):  # the smallest relaxation that saves, of each target
        loosest = _priced(model, env, catalogue, baseline[1], ceiling, *options[-1])
        if not loosest:
            continue  # the loosest saves nothing: a tighter one (which costs no less) saves nothing either
        for option in options[:-1]:
            priced = _priced(model, env, catalogue, baseline[1], ceiling, *option)
            if priced:
                found += priced
                break
        else:
            found += loosest
    for kind, change, changes, note in _load_options(model):
        found += _priced(model, env, catalogue, baseline[1], ceiling, kind, change, changes, note)
    return sorted(found, key=lambda a: (-a.monthly_saving_usd, a.change))


Option = tuple[str, str, Changes, str]


def _precision_options(model: Model) -> list[Option]:
    if not isinstance(model, LlmModelSpec):
        return []
    out: list[Option] = []
    own = model.size.dtype or "bf16"
    if fp8_weights_possible(model) and "fp8" not in model.precisions():
        out.append(("precision", f"size.dtype: {own} -> fp8 (vLLM quantizes the checkpoint while loading; or "
                    "precision: auto)", weights_changes(model, "fp8"), QUALITY))
    kv = "; uncalibrated scales unless the checkpoint ships them"
    if model.overrides.kv_cache_dtype != "fp8":
        out.append(("precision", "overrides.kv_cache_dtype: fp8 (half the KV cache)",
                    (("overrides.kv_cache_dtype", "fp8"),), QUALITY + kv))
    if len(out) == 2:  # kept only where it saves more than either alone (alternatives_of)
        out.append(("precision", f"size.dtype: {own} -> fp8 and overrides.kv_cache_dtype: fp8 (both)",
                    (*weights_changes(model, "fp8"), ("overrides.kv_cache_dtype", "fp8")), QUALITY + kv))
    return out


def _sla_options(model: Model) -> list[list[Option]]:
    if isinstance(model, LlmModelSpec):
        out = [_relaxed("sla.p99_ttft_ms", model.sla.p99_ttft_ms, "slower first tokens at peak")]
        if model.sla.p99_tpot_ms is not None:
            out.append(_relaxed("sla.p99_tpot_ms", model.sla.p99_tpot_ms, "slower streams at peak"))
        return out
    return [_relaxed("sla.p99_latency_ms", model.sla.p99_latency_ms, "slower answers at peak")]


def _relaxed(field: str, value: float, note: str) -> list[Option]:
    return [("sla", f"{field}: {value:g} -> {round(value * f):g}", ((field, round(value * f)),), note)
            for f in RELAXATIONS]


def _load_options(model: Model) -> list[Option]:
    sla = model.sla
    if isinstance(model, ClassicModelSpec):
        field, value = "sla.peak_rps", sla.peak_rps
    else:
        field, value = next((f"sla.{k}", v) for k, v in (
            ("peak_concurrent_sequences", sla.peak_concurrent_sequences),
            ("peak_output_tokens_per_s", sla.peak_output_tokens_per_s),
            ("peak_requests_per_s", sla.peak_requests_per_s)) if v is not None)
    lower = int(value * LOWER_LOAD) if isinstance(value, int) else round(value * LOWER_LOAD, 3)
    if not lower:
        return []
    return [("traffic", f"{field}: {value:g} -> {lower:g} (if the peak is {1 - LOWER_LOAD:.0%} lower than declared)",
             ((field, lower),), "the plan then serves only that peak: measure it before relying on it")]


def _ranking_usd(model: Model, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> float | None:
    """The bound an LLM's changes are searched within (USD/h at the planner's ranking price): just under its
    planned cost, as a change that costs the same saves nothing."""
    if not isinstance(model, LlmModelSpec):
        return None
    chosen = choose_precision(model, env, catalogue, 0)
    return None if isinstance(chosen, Issue) else chosen[1][0].usd_per_hour * (1 - STRICTLY_BELOW)


def _priced(model: Model, env: EnvironmentSpec, catalogue: InstanceCatalogue, baseline: float,
            ceiling: float | None, kind: str, change: str, changes: Changes, note: str) -> list[PlanAlternative]:
    try:
        variant = with_fields(model, changes)
    except ValueError:  # pydantic's ValidationError: beyond the field's bounds
        return []
    if ceiling is not None and isinstance(variant, LlmModelSpec) and not may_serve_within(variant, env, catalogue,
                                                                                           ceiling):
        return []  # no layout can serve the change for less than the entry as declared (module docstring)
    found = plan_alone(variant, env, catalogue)
    if found is None or baseline - found[1] < MIN_SAVING_USD or misses(variant, found[0]):
        return []
    planned, monthly = found
    return [PlanAlternative(model=model.name, kind=kind, change=change, changes=changes,
                            monthly_saving_usd=round(baseline - monthly, 2), monthly_usd=monthly,
                            baseline_monthly_usd=baseline, result=_result(planned), note=note)]


def misses(model: Model, planned: Any) -> bool:
    """An LLM plan pinned to its replicas (overrides.replicas, a single-replica stack) that misses its own SLA:
    no alternative, however cheap."""
    if not isinstance(planned, VllmModelPlan) or not isinstance(model, LlmModelSpec) or planned.estimates is None:
        return False
    tpot, e = model.sla.p99_tpot_ms, planned.estimates
    ttft = e.ttft_p99_bound_ms if e.ttft_p99_bound_ms is not None else planned.estimated_ttft_ms
    stream = e.tpot_p99_bound_ms if e.tpot_p99_bound_ms is not None else e.tpot_ms  # simulated, per request
    return ttft > model.sla.p99_ttft_ms or (tpot is not None and stream > tpot)


def _result(planned: Any) -> str:
    if isinstance(planned, VllmModelPlan):
        return (f"{planned.instance_type} tp={planned.tensor_parallel_size} pp={planned.pipeline_parallel_size} "
                f"x{planned.replicas}, predicted p99 TTFT {planned.estimated_ttft_ms:,.0f} ms"
                + (f", p99 TPOT {planned.estimates.tpot_p99_ms:.1f} ms" if planned.estimates and
                   planned.estimates.tpot_p99_ms is not None else ""))
    return f"{planned.instance_type} ({planned.device}) x{planned.replicas}, batch {planned.max_batch_size}"


def short(alternative: PlanAlternative) -> str:
    """One line for a table cell: the change and what it saves."""
    return f"{alternative.change.split(' (')[0]}: -{alternative.monthly_saving_usd:,.2f} USD/month"
