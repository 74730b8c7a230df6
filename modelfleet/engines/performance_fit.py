"""Fitting the performance model's per-GPU constants to measured data (used by ``modelfleet calibrate``).

Two fits, both least squares of log(predicted / measured), so a 10% miss weighs the same on a 5 us kernel
and on a 5 s prefill:

- ``fit_gemm``: the GEMM roofline (compute and memory efficiency, floor, blend) to a per-op GEMM table;
- ``fit_end_to_end``: what per-op tables do not pin down for vLLM as it runs (attention kernels, the fused
  MoE kernel, per-request dispatch, per-step overhead) to end-to-end TTFT/TPOT points.

Minimised by Nelder-Mead over log-parameters (positive by construction): a handful of parameters, a smooth
objective, and no dependency beyond numpy.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..plan.llm.speed.performance import GpuPerformance, Layout, LlmShape, Roofline, prefill_ms, tpot_ms


def nelder_mead(objective: Callable[[np.ndarray], float], start: Sequence[float], step: float = 0.3,
                iterations: int = 3000, tolerance: float = 1e-9) -> np.ndarray:
    """Minimise ``objective`` from ``start`` (standard reflection/expansion/contraction/shrink)."""
    n = len(start)
    simplex = [np.asarray(start, float)] + [np.asarray(start, float) + step * np.eye(n)[i] for i in range(n)]
    values = [objective(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if abs(values[-1] - values[0]) <= tolerance * (abs(values[0]) + tolerance):
            break
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = objective(reflected)
        if fr < values[0]:
            expanded = centroid + 2.0 * (centroid - simplex[-1])
            fe = objective(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = objective(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                values = [objective(x) for x in simplex]
    return simplex[int(np.argmin(values))]


def fit_gemm(rows: Sequence[tuple[int, int, int, float]], tflops: float, gbs: float,
             weight_bytes: float = 2.0) -> Roofline:
    """The Roofline that best predicts measured GEMMs ``(m, n, k, microseconds)`` on a GPU of this peak."""
    m, n, k, t = (np.array([row[i] for row in rows], float) for i in range(4))
    flops, nbytes = 2.0 * m * n * k, n * k * weight_bytes + 2.0 * m * (n + k)

    def predict(x: np.ndarray) -> np.ndarray:
        ce, me, floor, sharp = _gemm_parameters(x)
        compute, memory = flops / (tflops * 1e6 * ce), nbytes / (gbs * 1e3 * me)
        return (compute**sharp + memory**sharp) ** (1.0 / sharp) + floor

    best = nelder_mead(lambda x: float(np.mean(np.log(predict(x) / t) ** 2)), np.log([0.7, 0.8, 5.0, 2.0]))
    ce, me, floor, sharp = (float(v) for v in _gemm_parameters(best))
    return Roofline(round(ce, 4), round(me, 4), round(floor, 3), round(sharp, 3))


def _gemm_parameters(x: np.ndarray) -> np.ndarray:
    """Efficiencies and floor positive; the blend at least 1 (a sum) so neither bound is ever undercut."""
    values = np.exp(x)
    values[3] = 1.0 + values[3]
    return values


@dataclass(frozen=True)
class Measured:
    """One end-to-end point: a shape and layout at ``batch`` sequences, with measured prefill and TPOT."""

    shape: LlmShape
    layout: Layout
    batch: int
    input_tokens: int
    output_tokens: int
    prefill_ms: float
    tpot_ms: float


# The end-to-end parameters: (GpuPerformance field, Roofline field or None for a plain float).
END_TO_END = (("context_attention", "compute_efficiency"), ("context_attention", "floor_us"),
              ("decode_attention", "memory_efficiency"), ("decode_attention", "floor_us"),
              ("moe", "compute_efficiency"), ("moe", "memory_efficiency"), ("moe", "floor_us"),
              ("prefill_dispatch_ms_per_layer", None), ("step_overhead_us", None), ("mla_layer_floor_us", None),
              ("moe_expert_us", None), ("moe_ep_efficiency", None))
MOE_PARAMETERS, MLA_PARAMETERS, EP_PARAMETERS = (4, 5, 6, 10), (9,), (11,)


def with_parameters(gpu: GpuPerformance, values: Sequence[float]) -> GpuPerformance:
    changes: dict[str, object] = {}
    for (name, part), value in zip(END_TO_END, values):
        if part is None:
            changes[name] = float(value)
        else:
            base = changes.get(name, getattr(gpu, name))
            changes[name] = dataclasses.replace(base, **{part: float(value)})
    return dataclasses.replace(gpu, **changes)


def parameters(gpu: GpuPerformance) -> list[float]:
    return [getattr(gpu, name) if part is None else getattr(getattr(gpu, name), part) for name, part in END_TO_END]


def log_errors(gpu: GpuPerformance, points: Sequence[Measured]) -> tuple[list[float], list[float]]:
    """log(predicted / measured) of prefill and of TPOT at every point."""
    prefill, tpot = [], []
    for p in points:
        prefill.append(math.log(prefill_ms(gpu, p.shape, p.layout, p.input_tokens) / p.prefill_ms))
        tpot.append(math.log(tpot_ms(gpu, p.shape, p.layout, p.batch, p.input_tokens, p.output_tokens) / p.tpot_ms))
    return prefill, tpot


def fit_end_to_end(gpu: GpuPerformance, points: Sequence[Measured]) -> GpuPerformance:
    """``gpu`` with its END_TO_END parameters fitted to ``points`` (prefill and TPOT weigh the same)."""
    uninformed = (() if any(p.shape.is_moe for p in points) else MOE_PARAMETERS) + (
        () if any(p.shape.is_mla for p in points) else MLA_PARAMETERS) + (
        () if any(p.layout.expert_parallel for p in points) else EP_PARAMETERS)

    def objective(x: np.ndarray) -> float:
        values = np.exp(x)
        if np.any(values[[0, 2, 4, 5, 11]] > 1.5):  # efficiencies above 150% of the data sheet are not physical
            return 1e9
        prefill, tpot = log_errors(with_parameters(gpu, values), points)
        return float(np.mean(np.square(prefill)) + np.mean(np.square(tpot)))

    start = np.log(np.maximum(parameters(gpu), 1e-3))
    best = np.exp(nelder_mead(objective, start, iterations=2000))
    for index in uninformed:  # no point informs it: keep the starting constant
        best[index] = parameters(gpu)[index]
    return with_parameters(gpu, [round(float(v), 4) for v in best])
