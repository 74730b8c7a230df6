"""How fast one classic model runs on one GPU model, and what that figure rests on (docs/profiles.md).

Three cases, in order:

1. **Measured, per batch size** (``profile.batches``, what ``modelfleet profile`` writes): the largest measured
   batch (up to the type's default, or exactly ``overrides.max_batch_size``) whose p99 fits in 0.4 of the p99
   budget; its p99 is a full batch's time and its throughput the instance's.
2. **Measured, one batch** (``profile.compute_ms`` / ``rps_per_instance``, perf_analyzer's figures): as before.
3. **Unmeasured**: nothing says how fast the model is, only how fast it *cannot* be (plan/triton/bounds.py). The plan
   then gives a full batch an *execution budget* of a quarter of the p99, never less than the datasheet bound:

       compute_ms = max(EXECUTION_BUDGET_FRACTION x p99, bound(batch, GPU))

   The budget is a requirement the plan places on the model, not a prediction: with the queue derivation
   (triton_policy) a request may queue for as long as it may execute (p99 = timeout + 2 x compute, so a
   quarter leaves half the p99 to queue in), and every answered request meets the p99 *if* a full batch runs
   within it. The plan says so beside the figure; a measurement replaces it. The batch halves while its
   bound exceeds 0.4 of the p99, and an SLA that even one item's bound cannot meet is a CompileError
   (triton_policy.check_budget names the bound).

Measured figures move between GPUs by the roofline ratio (:func:`speed_ratio`). Figures taken on a CPU
(``measured_on: cpu``) apply only to python-backend models, whose ``execute()`` runs on the node's CPU either
way; for any other backend they say nothing about a GPU, and the model is planned as unmeasured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...spec.models import ClassicModelSpec
from ...spec.profiles import CPU, BatchProfileSpec, ClassicProfileSpec
from .bounds import BatchBound, batch_bound
from ..hardware.instances import GpuType, InstanceCatalogue

# Without a measurement a full batch must execute within this share of the p99 (see the module docstring).
EXECUTION_BUDGET_FRACTION = 0.25
# ...and batches are assumed half full on average when estimating throughput from that budget.
ASSUMED_BATCH_FILL = 0.5
# Batch sizes shrink (by halves) until a full batch executes within this share of the p99 budget: two
# executions (the one waited behind and its own) then leave at least a fifth of it to queue in.
MAX_BATCH_BUDGET_FRACTION = 0.4


@dataclass(kw_only=True, frozen=True)
class ClassicSpeed:
    batch: int  # max_batch_size
    compute_ms: float  # a full batch's execution on this GPU
    rps: float  # one instance on this GPU
    measured: bool  # both figures rest on a measurement that applies here
    basis: str  # what they rest on, in one phrase (plan text, --json, cost comment)
    bound: BatchBound | None  # the datasheet bound of a full batch here (None: size given as memory_gib)
    assumed: tuple[str, ...] = ()  # figures that are assumptions (warned once)


def speed_ratio(reference: GpuType, gpu: GpuType) -> float:
    """How much faster ``gpu`` runs a model measured on ``reference``: the smaller of the FP16 TFLOPS and
    memory bandwidth ratios (an L4 has an A10G's TFLOPS but half its bandwidth: half as fast; an H100 is
    5.6x an A10G, not 7.9x). Without both bandwidths, the TFLOPS ratio, never above 1 (no speed-up assumed)."""
    compute = gpu.fp16_tflops / reference.fp16_tflops
    if gpu.memory_bandwidth_gbs and reference.memory_bandwidth_gbs:
        return min(compute, gpu.memory_bandwidth_gbs / reference.memory_bandwidth_gbs)
    return min(compute, 1.0)


def gpu_by_key(catalogue: InstanceCatalogue, key: str) -> GpuType | None:
    return next((i.gpu for i in catalogue.instances.values() if i.gpu.key == key), None)


def classic_speed(model: ClassicModelSpec, gpu: GpuType, catalogue: InstanceCatalogue, batch: int) -> ClassicSpeed:
    """``model``'s max batch, a full batch's time and an instance's throughput on ``gpu``, from ``batch`` (the
    type's default or the override) and its profile where it applies."""
    profile = model.profile
    applies = profile.measured and (profile.measured_on != CPU or model.framework == "python")
    bound = _bound_of(model, gpu)
    if applies and profile.batches:
        return _from_table(model, gpu, catalogue, batch, bound)
    if applies:
        return _from_figures(model, gpu, catalogue, batch, bound)
    return _unmeasured(model, gpu, batch, bound)


def _bound_of(model: ClassicModelSpec, gpu: GpuType):
    """batch -> its datasheet bound on ``gpu``; None when the size is a memory figure (no params, no dtype)."""
    if model.size.params is None or model.size.dtype is None:
        return None
    return lambda batch: batch_bound(model.size.params, model.size.dtype, max(batch, 1), gpu)


def _measured_where(profile: ClassicProfileSpec, gpu: GpuType, catalogue: InstanceCatalogue) -> tuple[float, str]:
    """(ratio to scale the measured figures by, how they were taken and moved to ``gpu``)."""
    when = f", {profile.measured_at}" if profile.measured_at else ""
    if profile.measured_on == CPU:
        return 1.0, (f"measured on a CPU{when}, used as measured: a python-backend model's execute() runs on the "
                     "node's CPU")
    reference = gpu_by_key(catalogue, profile.measured_on)
    if reference is None:
        return 1.0, f"measured on {profile.measured_on}{when} (not in the instance table: used unscaled)"
    ratio = speed_ratio(reference, gpu)
    moved = "" if reference.key == gpu.key else f", scaled to {gpu.name} by the roofline ratio {ratio:.3g}"
    return ratio, f"measured on {reference.name}{when}{moved}"


def _row(rows: tuple[BatchProfileSpec, ...], batch: int) -> tuple[float, float]:
    """(p99 ms, throughput) for exactly ``batch`` items: the smallest measured batch at least as large (its time
    bounds a smaller one's), else the largest, its time scaled up in proportion (throughput kept)."""
    above = [r for r in rows if r.batch_size >= batch]
    if above:
        return above[0].p99_ms, above[0].throughput_rps
    last = rows[-1]
    return last.p99_ms * batch / last.batch_size, last.throughput_rps


def _from_table(model: ClassicModelSpec, gpu: GpuType, catalogue: InstanceCatalogue, batch: int,
                bound) -> ClassicSpeed:
    ratio, basis = _measured_where(model.profile, gpu, catalogue)
    rows = model.profile.batches
    if model.overrides.max_batch_size is None:
        fitting = [r for r in rows if r.batch_size <= max(batch, 1)] or [rows[0]]
        limit = model.sla.p99_latency_ms * MAX_BATCH_BUDGET_FRACTION
        within = [r for r in fitting if r.p99_ms / ratio <= limit]
        batch = (within or fitting[:1])[-1].batch_size
    p99, throughput = _row(rows, max(batch, 1))
    return ClassicSpeed(batch=batch, compute_ms=round(p99 / ratio, 3), rps=throughput * ratio, measured=True,
                        basis=f"{basis}: batch {batch} of the measured batch sizes "
                        f"{', '.join(str(r.batch_size) for r in rows)}", bound=bound and bound(batch))


def _from_figures(model: ClassicModelSpec, gpu: GpuType, catalogue: InstanceCatalogue, batch: int,
                  bound) -> ClassicSpeed:
    """perf_analyzer's figures of one full batch; the one not measured is assumed as in the unmeasured case."""
    profile, p99 = model.profile, model.sla.p99_latency_ms
    ratio, basis = _measured_where(profile, gpu, catalogue)
    assumed: list[str] = []
    compute = round(profile.compute_ms / ratio, 3) if profile.compute_ms is not None else None
    if compute is None:
        compute = _budget_ms(p99, bound, batch)
        assumed.append(f"compute_ms={compute:g} (an execution budget: {EXECUTION_BUDGET_FRACTION:.0%} of p99)")
    rps = profile.rps_per_instance * ratio if profile.rps_per_instance is not None else None
    if rps is None:
        rps = batch * ASSUMED_BATCH_FILL / (compute / 1000.0)
        assumed.append(f"rps_per_instance={rps:g} (half-full batches of {batch} every {compute:g} ms)")
    else:
        if model.overrides.max_batch_size is None:
            batch = batch_within_budget(batch, rps, p99)
        # A full batch cannot finish faster than the measured throughput allows; a profile saying otherwise
        # would leave too little of the p99 budget for execution.
        compute = max(compute, round(1000.0 * max(batch, 1) / rps, 3))
    what = basis if not assumed else f"partly measured ({basis}); the rest assumed"
    return ClassicSpeed(batch=batch, compute_ms=compute, rps=rps, measured=not assumed, basis=what,
                        bound=bound and bound(batch), assumed=tuple(assumed))


def batch_within_budget(batch: int, rps: float, p99_ms: float) -> int:
    """The type's default batch, halved until a full batch takes at most 0.4 of the p99 budget at ``rps``."""
    while batch > 1 and 1000.0 * batch / rps > p99_ms * MAX_BATCH_BUDGET_FRACTION:
        batch //= 2
    return batch


def _budget_ms(p99_ms: float, bound, batch: int) -> float:
    """The execution budget of a full batch, never below its datasheet bound (rounded up to the microsecond)."""
    budget = p99_ms * EXECUTION_BUDGET_FRACTION
    floor = bound(batch).ms if bound else 0.0
    return budget if budget >= floor else math.ceil(floor * 1000) / 1000


def _batch_for_bound(batch: int, bound, p99_ms: float) -> int:
    """Halve the batch while its bound exceeds 0.4 of the p99; when even one item's does, keep the largest
    batch that takes no longer than one item (memory-bound: the same weights read serve the whole batch)."""
    limit = p99_ms * MAX_BATCH_BUDGET_FRACTION
    chain = [batch]
    while chain[-1] > 1:
        chain.append(chain[-1] // 2)
    within = [b for b in chain if bound(b).ms <= limit]
    if within:
        return within[0]
    single = bound(1).ms
    return next(b for b in chain if bound(b).ms <= single * (1 + 1e-9))


def _unmeasured(model: ClassicModelSpec, gpu: GpuType, batch: int, bound) -> ClassicSpeed:
    p99 = model.sla.p99_latency_ms
    if bound is not None and model.overrides.max_batch_size is None and batch > 1:
        batch = _batch_for_bound(batch, bound, p99)
    compute = _budget_ms(p99, bound, batch)
    rps = max(batch, 1) * ASSUMED_BATCH_FILL / (compute / 1000.0)
    limit = bound(batch) if bound else None
    why = (f"datasheet bound {limit.ms:.3g} ms ({limit.describe()})" if limit else
           "no datasheet bound: the size is given as memory_gib (declare size.params and dtype for one)")
    cpu = " (its profile was measured on a CPU, which says nothing about a GPU)" if model.profile.measured else ""
    basis = (f"UNMEASURED{cpu}: a full batch of {max(batch, 1)} is given an execution budget of {compute:g} ms "
             f"({EXECUTION_BUDGET_FRACTION:.0%} of the p99, never below the datasheet bound), not a measurement; "
             f"{why}")
    assumed = (f"compute_ms={compute:g} (an execution budget, {why})",
               f"rps_per_instance={rps:g} (half-full batches of {max(batch, 1)} every {compute:g} ms)")
    return ClassicSpeed(batch=batch, compute_ms=compute, rps=rps, measured=False, basis=basis, bound=limit,
                        assumed=assumed)
