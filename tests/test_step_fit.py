"""The step-time fit (modelfleet/engines/step_fit.py) and the pure half of the simulator-vs-vLLM check
(modelfleet/engines/simulation_check.py), without vLLM: tests/engines/test_vllm_simulation.py runs them on it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.engines import simulation_check as check
from modelfleet.engines.step_fit import TERMS, FitError, Observation, StepFit, fit_step_time
from modelfleet.engines.vllm_bench import LlmLoad, LlmMeasurement

PROMPTS = (40, 300, 800, 1500)
BATCHES = (1, 4, 8)


def _observations(coefficients: dict[str, float], contexts: tuple[int, ...] = (64,)) -> list[Observation]:
    truth = StepFit(**coefficients, points=())
    lone = [Observation(kind="first_token", ms=truth.overhead_ms + truth(p, p, 0, 0), prefill_tokens=p)
            for p in PROMPTS]
    decode = [Observation(kind="decode_step", ms=truth(0, 0, b, c), decodes=b, context_per_decode=c)
              for b in BATCHES for c in contexts]
    return lone + decode


positive = st.floats(min_value=0.05, max_value=50.0)
per_token = st.one_of(st.just(0.0), st.floats(min_value=1e-4, max_value=0.1))


@settings(max_examples=60, deadline=None)
@given(overhead=positive, base=positive, prefill=per_token, attention=st.one_of(st.just(0.0), st.floats(1e-7, 1e-4)),
       decode=per_token, context=st.one_of(st.just(0.0), st.floats(1e-6, 1e-3)))
def test_exact_measurements_give_back_the_model(overhead, base, prefill, attention, decode, context):
    coefficients = dict(overhead_ms=overhead, base_ms=base, prefill_token_ms=prefill, prefill_attention_ms=attention,
                        decode_ms=decode, decode_context_ms=context)
    observations = _observations(coefficients, contexts=(64, 1000))
    fit = fit_step_time(observations)
    assert fit.max_abs_error() < 1e-6
    truth = StepFit(**coefficients, points=())
    for shape in ((512, 512, 0, 0), (256, 1024, 3, 400), (0, 0, 11, 2000), (2048, 2048, 8, 100)):
        assert fit(*shape) == pytest.approx(truth(*shape), rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.01, max_value=1000.0), min_size=len(PROMPTS) + len(BATCHES),
                max_size=len(PROMPTS) + len(BATCHES)))
def test_any_measurements_give_non_negative_coefficients(times):
    """A step never gets faster with more work, however noisy the figures (even decreasing ones)."""
    shapes = _observations(dict(overhead_ms=1, base_ms=1, prefill_token_ms=0.01, prefill_attention_ms=0,
                                decode_ms=0.1, decode_context_ms=0))
    observations = [Observation(kind=o.kind, ms=t, prefill_tokens=o.prefill_tokens, decodes=o.decodes,
                                context_per_decode=o.context_per_decode) for o, t in zip(shapes, times)]
    fit = fit_step_time(observations)
    assert all(getattr(fit, f"{term}_ms") >= 0 for term in TERMS)
    assert all(math.isfinite(e) for e in fit.errors())


def test_the_fit_is_the_least_relative_error():
    """Noisy figures: the fit beats the true model's relative squared error (it minimises it)."""
    coefficients = dict(overhead_ms=3, base_ms=2, prefill_token_ms=0.02, prefill_attention_ms=0, decode_ms=0.3,
                        decode_context_ms=0)
    noisy = [Observation(kind=o.kind, ms=o.ms * (1.1 if i % 2 else 0.93), prefill_tokens=o.prefill_tokens,
                         decodes=o.decodes, context_per_decode=o.context_per_decode)
             for i, o in enumerate(_observations(coefficients))]
    fit = fit_step_time(noisy)
    truth = StepFit(**coefficients, points=tuple((o, o.ms / (1.1 if i % 2 else 0.93)) for i, o in enumerate(noisy)))
    assert sum(e * e for e in fit.errors()) <= sum(e * e for e in truth.errors())
    assert 0.05 < fit.max_abs_error() < 0.15


@pytest.mark.parametrize("kinds", [("first_token",), ("decode_step",)])
def test_one_kind_of_figure_cannot_separate_the_overhead(kinds):
    observations = [o for o in _observations(dict(overhead_ms=1, base_ms=1, prefill_token_ms=0.01,
                                                  prefill_attention_ms=0, decode_ms=0.1, decode_context_ms=0))
                    if o.kind in kinds] * 3
    with pytest.raises(FitError, match="need both"):
        fit_step_time(observations)


def test_uniform_lengths_are_vllm_random_datasets():
    """vllm/benchmarks/datasets/utils.py: integers in [floor(len (1 - r)), ceil(len (1 + r))], at least 1."""
    lengths = check.uniform_lengths(512, 0.5)
    tokens = [t for t, _ in lengths.histogram]
    assert (tokens[0], tokens[-1], len(set(tokens))) == (256, 768, 513)
    assert {w for _, w in lengths.histogram} == {1.0}
    assert [t for t, _ in check.uniform_lengths(3, 0.9).histogram] == [1, 2, 3, 4, 5, 6]
    assert [t for t, _ in check.uniform_lengths(64, 0.0).histogram] == [64]


def test_first_token_bins_take_medians_by_prompt_length():
    prompts = [40, 1500, 800, 300, 41, 1490, 810, 290]
    ttfts = [5.0, 50.0, 30.0, 12.0, 500.0, 52.0, 31.0, 11.0]  # one lone request waited for the CPU (500)
    observations = check.first_token_observations(prompts, ttfts)
    assert [(o.prefill_tokens, o.ms) for o in observations] == [(40, 252.5), (295, 11.5), (805, 30.5),
                                                                 (1495, 51.0)]


def test_calibration_stays_within_the_engine_limits():
    setup = check.CheckSetup(max_num_seqs=4, max_num_batched_tokens=1024, kv_cache_tokens=65536, input_tokens=256,
                             output_tokens=32, range_ratio=0.5)
    loads = check.calibration_loads(setup)
    lone = [load for kind, load in loads if kind == "first_token"]
    assert len(lone) == 1 and math.ceil(lone[0].input_tokens * (1 + lone[0].range_ratio)) <= 1024
    assert [load.concurrency for kind, load in loads if kind == "decode_step"] == [1, 4]
    setup = check.CheckSetup(max_num_seqs=11, max_num_batched_tokens=2048, kv_cache_tokens=65536, input_tokens=2000,
                             output_tokens=32, range_ratio=0.5)
    assert [load.concurrency for kind, load in check.calibration_loads(setup) if kind == "decode_step"] == [1, 4, 11]
    (lone,) = [load for kind, load in check.calibration_loads(setup) if kind == "first_token"]
    assert math.ceil(lone.input_tokens * (1 + lone.range_ratio)) <= 2048
    assert all(load.request_rate is None for _, load in loads)


def test_decode_observation_reads_the_median_tpot():
    load = LlmLoad(4, 32, 64, 12)
    measured = LlmMeasurement(12, 0, 1.0, 9.0, 20.0, 3.5, 4.0, 100.0)
    assert check.decode_observation(load, measured) == Observation(kind="decode_step", ms=3.5, decodes=4,
                                                                   context_per_decode=64)
