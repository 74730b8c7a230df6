"""How fast a classic model cannot run: the datasheet lower bound of one batch's execution on one GPU.

A batch's forward pass reads every weight from GPU memory at least once and does at least one multiply-add
(2 FLOPs) per weight and item, so on a GPU of memory bandwidth ``BW`` and dense peak ``F``:

    time(batch)  >=  max(weight bytes / BW,  2 x params x batch / F)

Why each side is a true lower bound (docs/profiles.md has the derivation and the cases it does not cover):

* weights: a dense layer or a convolution uses each of its weights for every item, so none can be skipped;
  weights larger than the GPU's L2 cache (at most 50 MB on the catalogue's GPUs) cannot stay on chip between
  batches, and for smaller ones the bound is under 0.02 ms, below anything it could decide;
* FLOPs: a convolution uses each weight many times per item, so 2 x params x batch undercounts it, which
  keeps the bound low; ``F`` is the dense FP16/BF16 tensor peak, doubled for 8-bit weights (FP8/INT8 tensor
  cores) and quadrupled for 4-bit: the fastest rate the GPU has for that dtype, so the bound stays below the
  truth (FP32 runs slower than the FP16 peak, never faster).

It does not hold for a model that reads only some of its weights per request (embedding tables, a mixture
of experts): a measured profile replaces it. Pure; figures from the instance catalogue's ``gpus:``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import Issue
from ...spec.units import DTYPE_BYTES, GIB, format_param_count
from ..hardware.instances import GpuType

# The fastest tensor-core rate a dtype's weights can run at, relative to the FP16/BF16 dense peak.
# Some of the p99 must be left to queue in (the batching window is at least 100 us of it): an SLA within 5% of
# the two executions' bound has, for practical purposes, none.
IMPOSSIBLE_MARGIN = 0.05
PEAK_FACTOR = {"fp32": 1.0, "fp16": 1.0, "bf16": 1.0, "fp8": 2.0, "int8": 2.0, "int4": 4.0}


@dataclass(kw_only=True, frozen=True)
class BatchBound:
    """The two bounds of one batch on one GPU, in milliseconds, and the figures they come from."""

    params: int
    dtype: str
    batch: int
    gpu: GpuType
    memory_ms: float | None  # weights / bandwidth; None when the catalogue has no bandwidth for the GPU
    compute_ms: float  # 2 x params x batch / peak

    @property
    def ms(self) -> float:
        return max(self.memory_ms or 0.0, self.compute_ms)

    @property
    def binding(self) -> str:
        return "memory bandwidth" if (self.memory_ms or 0.0) >= self.compute_ms else "compute"

    def figures(self) -> str:
        """``13.04 GiB of fp16 weights at 3,350 GB/s = 4.18 ms (and 2 x 7B params x 1 FLOPs at 989 TFLOPS =
        0.0142 ms)``: the binding side first."""
        weights = self.params * DTYPE_BYTES[self.dtype]
        memory = (f"{weights / GIB:,.2f} GiB of {self.dtype} weights at {self.gpu.memory_bandwidth_gbs:,.0f} GB/s "
                  f"= {_ms(self.memory_ms)}") if self.memory_ms is not None else "memory bandwidth unknown"
        compute = (f"2 x {format_param_count(self.params)} params x {self.batch} FLOPs at "
                   f"{self.gpu.fp16_tflops * PEAK_FACTOR[self.dtype]:,.0f} TFLOPS = {_ms(self.compute_ms)}")
        parts = (memory, compute) if self.binding == "memory bandwidth" else (compute, memory)
        return f"{parts[0]} (and {parts[1]})"

    def describe(self) -> str:
        return f"batch of {self.batch} on {self.gpu.name}: {self.figures()}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} ms"


def batch_bound(params: int, dtype: str, batch: int, gpu: GpuType) -> BatchBound:
    """The datasheet bound of one batch of ``batch`` items of a ``params``-parameter model on ``gpu``."""
    weights = params * DTYPE_BYTES[dtype]
    memory = weights / (gpu.memory_bandwidth_gbs * 1e9) * 1e3 if gpu.memory_bandwidth_gbs else None
    compute = 2.0 * params * batch / (gpu.fp16_tflops * PEAK_FACTOR[dtype] * 1e12) * 1e3
    return BatchBound(params=params, dtype=dtype, batch=batch, gpu=gpu, memory_ms=memory, compute_ms=compute)


def bound_issue(name: str, p99_ms: float, bound: BatchBound, path: str, executions: int) -> Issue | None:
    """A CompileError issue when even one item's bound leaves no time to queue within ``p99_ms``: the worst
    answered request waits for the batch in progress and runs its own (``executions`` of them), so the SLA
    asks for a batch faster than the GPU's datasheet allows. Names the bound, its figures and the GPU."""
    single = batch_bound(bound.params, bound.dtype, 1, bound.gpu)
    worst = executions * single.ms
    if worst < p99_ms * (1 - IMPOSSIBLE_MARGIN):
        return None
    fix = (f"raise sla.p99_latency_ms above {math.ceil(worst / (1 - IMPOSSIBLE_MARGIN))} ms; or store the weights "
           f"in fewer bits (size.dtype fp8 or int8 halves the bytes read); or, if the model reads only part of its "
           "weights per request (embedding tables, a mixture of experts), measure it (`modelfleet profile`): a "
           "measured profile replaces the bound")
    return Issue("", 0, 0, path, f"{name}: p99 {p99_ms:g} ms is below the datasheet bound on {single.gpu.name}: "
                 f"one item, a batch of 1, is {single.binding}-bound: {single.figures()}; the worst answered request "
                 f"waits for the batch in progress and runs its own, at least {executions} x {single.ms:.3g} = "
                 f"{worst:.3g} ms (the model has no measured profile)", fix)


def elsewhere(bound: BatchBound, p99_ms: float, executions: int, others: dict[str, GpuType]) -> str:
    """For the fix of :func:`bound_issue`: the families (``others``: family -> its GPU, those the stack does not
    allow) whose GPU's bound leaves time to queue, or the fastest GPU's figure when none does."""
    worst = {family: executions * batch_bound(bound.params, bound.dtype, 1, gpu).ms for family, gpu in others.items()}
    fitting = sorted(f for f, ms in worst.items() if ms < p99_ms * (1 - IMPOSSIBLE_MARGIN))
    if fitting:
        return f"; or allow {' or '.join(fitting)}, whose GPUs' bound leaves time to queue"
    if not worst:
        return ""
    family = min(worst, key=lambda f: (worst[f], f))
    return (f"; no GPU in the instance table is fast enough: the fastest, {others[family].name} ({family}), "
            f"takes {worst[family]:.3g} ms for the two executions")
