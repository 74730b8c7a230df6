"""The calibration fits recover constants they are given (synthetic tables made from known constants)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from modelfleet.engines.performance_fit import Measured, fit_end_to_end, fit_gemm, nelder_mead, parameters
from modelfleet.plan.llm.speed.performance import Layout, Roofline, prefill_ms, tpot_ms

from .test_performance import IDEAL_H100, LLAMA_8B, MIXTRAL


def test_nelder_mead_finds_a_quadratic_minimum():
    best = nelder_mead(lambda x: float((x[0] - 1.5) ** 2 + 3 * (x[1] + 0.5) ** 2), [0.0, 0.0])
    assert best == pytest.approx([1.5, -0.5], abs=1e-3)


def test_fit_gemm_recovers_a_known_roofline():
    truth = Roofline(0.75, 0.85, 6.0, 2.5)
    rows = [(m, n, k, truth.time_us(2.0 * m * n * k, n * k * 2 + 2.0 * m * (n + k), 989, 3350))
            for m in (1, 8, 64, 512, 4096, 16384) for n in (1024, 4096, 14336) for k in (1024, 4096, 8192)]
    fitted = fit_gemm(rows, 989, 3350)
    assert fitted.compute_efficiency == pytest.approx(0.75, rel=0.02)
    assert fitted.memory_efficiency == pytest.approx(0.85, rel=0.02)
    assert fitted.floor_us == pytest.approx(6.0, rel=0.1)


def test_end_to_end_fit_recovers_attention_dispatch_and_moe_constants():
    truth = dataclasses.replace(
        IDEAL_H100, context_attention=Roofline(0.4, 0.5, 12.0, 64.0), decode_attention=Roofline(1.0, 0.7, 14.0, 64.0),
        moe=Roofline(0.55, 0.65, 25.0, 64.0), prefill_dispatch_ms_per_layer=0.8, step_overhead_us=90.0)
    points = []
    for shape in (LLAMA_8B, MIXTRAL):
        for batch, isl, osl in ((1, 512, 128), (8, 4096, 512), (64, 1024, 256), (128, 16384, 1536), (32, 256, 64)):
            layout = Layout(tp=2)
            points.append(Measured(shape, layout, batch, isl, osl, prefill_ms(truth, shape, layout, isl),
                                   tpot_ms(truth, shape, layout, batch, isl, osl)))
    start = dataclasses.replace(truth, context_attention=Roofline(0.6, 0.5, 5.0, 64.0),
                                decode_attention=Roofline(1.0, 0.9, 5.0, 64.0), moe=Roofline(0.8, 0.9, 10.0, 64.0),
                                prefill_dispatch_ms_per_layer=0.3, step_overhead_us=30.0)
    fitted = fit_end_to_end(start, points)
    for point in points:  # the fit reproduces every point, whatever the identifiability of each constant
        assert prefill_ms(fitted, point.shape, point.layout, point.input_tokens) == pytest.approx(point.prefill_ms, rel=0.02)
        assert tpot_ms(fitted, point.shape, point.layout, point.batch, point.input_tokens,
                       point.output_tokens) == pytest.approx(point.tpot_ms, rel=0.02)
    assert parameters(fitted)[7] == pytest.approx(0.8, rel=0.1)  # dispatch per layer: 26 ms of a 512-token prefill
    assert np.all(np.array(parameters(fitted)) >= 0)


def test_the_expert_parallel_kernel_gets_its_own_efficiency():
    """Expert-parallel points alone inform moe_ep_efficiency: a synthetic truth with the kernel at 60% of the
    tensor-parallel one's efficiency is recovered from a mix of both layouts; without expert-parallel points
    the constant keeps its neutral start."""
    truth = dataclasses.replace(IDEAL_H100, moe=Roofline(0.55, 0.65, 25.0, 64.0), moe_ep_efficiency=0.6)
    points = []
    for ep in (False, True):
        for batch, isl, osl in ((1, 512, 128), (4, 1024, 512), (64, 2048, 256), (16, 4096, 1000)):
            layout = Layout(tp=4, expert_parallel=ep)
            points.append(Measured(MIXTRAL, layout, batch, isl, osl, prefill_ms(truth, MIXTRAL, layout, isl),
                                   tpot_ms(truth, MIXTRAL, layout, batch, isl, osl)))
    start = dataclasses.replace(truth, moe_ep_efficiency=1.0)
    assert fit_end_to_end(start, points).moe_ep_efficiency == pytest.approx(0.6, rel=0.1)
    tensor_parallel_only = [p for p in points if not p.layout.expert_parallel]
    assert fit_end_to_end(start, tensor_parallel_only).moe_ep_efficiency == 1.0
