"""An LLM's measured profile in its plan: reported always, checked against the SLA where it applies.

A measurement (``vllm bench serve``, written by ``modelfleet profile --llm``) applies to a plan that runs the
model on the GPU and tensor-parallel size it was taken on, one node per replica. Then:

* it **misses** the SLA's p99 TTFT (or p99 TPOT) at no more sequences in flight than the plan puts on each
  replica at peak: a CompileError. A replica of the plan carries at least that load, and latency grows with
  load, so the plan cannot meet the SLA on that layout; the fix names what to change;
* it misses only at *more* sequences than the plan puts on a replica: a warning. The plan's replicas are less
  loaded than the measurement, so the miss proves nothing; re-measure at the plan's load;
* it meets the SLA: the verdict says at which load (a measurement at less than the plan's load is no proof).

Measured on another GPU, another tensor-parallel size, or the CPU (the local vLLM of ``modelfleet serve``):
reported, not checked. Planned estimates stay the performance model's (plan/llm/speed/performance.py).
"""

from __future__ import annotations

import math

from ...errors import Issue
from ...spec.models import LlmModelSpec
from ..types import LlmMeasuredPlan, VllmModelPlan, Warning_


def sequences_per_replica(load_sequences: int, plan: VllmModelPlan) -> int:
    """Sequences in flight on each replica at peak: the load spread over the replicas, at most max_num_seqs."""
    return min(plan.max_num_seqs, max(1, math.ceil(load_sequences / max(plan.replicas, 1))))


def _misses(model: LlmModelSpec, measured: LlmMeasuredPlan) -> list[tuple[str, float, float]]:
    """(metric, measured p99, SLA) for every SLA target the measurement's p99 exceeds."""
    # p99_tpot_ms is optional: a model without one is checked on TTFT only
    targets = [("TTFT", model.sla.p99_ttft_ms, measured.ttft_p99_ms), ("TPOT", model.sla.p99_tpot_ms, measured.tpot_p99_ms)]
    out = []
    for metric, sla, value in targets:
        if sla is not None and value > sla:
            out.append((metric, value, float(sla)))
    return out


def with_measurement(plan: VllmModelPlan, model: LlmModelSpec, gpu_key: str, load_sequences: int, index: int,
                     issues: list[Issue], warnings: list[Warning_]) -> VllmModelPlan:
    """``plan`` with its measured profile and the verdict on it; an Issue or a Warning_ as the docstring says."""
    profile = model.profile
    if not profile.measured:
        return plan
    where = f"{profile.measured_on} tp={profile.tensor_parallel}"
    load = sequences_per_replica(load_sequences, plan)
    applies = (profile.measured_on == gpu_key and profile.tensor_parallel == plan.tensor_parallel_size
               and plan.pipeline_parallel_size == 1)
    measured = LlmMeasuredPlan(**{f: getattr(profile, f) for f in LlmMeasuredPlan.model_fields if f not in (
        "applies", "verdict")}, applies=applies, verdict="")
    return plan.model_copy(update={"measured": measured.model_copy(update={
        "verdict": _verdict(model, measured, where, gpu_key, plan, load, index, issues, warnings)})})


def _verdict(model: LlmModelSpec, measured: LlmMeasuredPlan, where: str, gpu_key: str, plan: VllmModelPlan,
             load: int, index: int, issues: list[Issue], warnings: list[Warning_]) -> str:
    if not measured.applies:
        return (f"measured on {where}, not on this plan's {gpu_key} tp={plan.tensor_parallel_size} "
                f"pp={plan.pipeline_parallel_size}: reported, not checked against the SLA")
    misses = _misses(model, measured)
    figures = "; ".join(f"p99 {m} {v:g} ms > SLA {s:g} ms" for m, v, s in misses)
    at = f"at {measured.concurrency} sequences in flight"
    if misses and measured.concurrency <= load:
        issues.append(Issue("", 0, 0, f"models[{index}].profile", f"{model.name}: measured on {where} {at}, no more "
                            f"than the {load} the plan puts on each replica at peak, it misses the SLA: {figures}",
                            "raise the SLA to the measured figures, or give the model a faster layout "
                            "(overrides.instance_type or tensor_parallel_size) and measure it there "
                            "(`modelfleet profile --llm`)"))
        return f"misses the SLA {at} (<= {load} per replica at peak): {figures}"
    if misses:
        warnings.append(Warning_(model=model.name, message=f"measured on {where} {at}, more than the {load} the "
                                 f"plan puts on each replica, it misses the SLA ({figures}); at the plan's load it may "
                                 f"not: re-measure at --concurrency {load}"))
        return f"misses the SLA {at}, more than the plan's {load} per replica: not conclusive ({figures})"
    proof = "at least" if measured.concurrency >= load else "fewer than"
    return (f"meets the SLA {at}, {proof} the {load} the plan puts on each replica at peak"
            + ("" if proof == "at least" else f" (no proof at peak: re-measure at --concurrency {load})"))
