"""From engine steps to an SLA's figures: the queueing of prompts, the chunk size, the search for the most
sequences a replica may run, and a measured correction."""

from __future__ import annotations

import math
import random

import pytest

from modelfleet.plan.llm.fit import fit_layout
from modelfleet.plan.llm.speed.load import Demand, Fit, Miss, Speed, SpeedCorrection, batched_tokens, largest, p99_wait_ms
from modelfleet.plan.llm.speed.performance import Layout, shape_from_fields
from modelfleet.plan.llm.speed.calibration import load_performance_table
from modelfleet.spec.presets import LLM_PRESETS

LLAMA_8B = shape_from_fields(LLM_PRESETS["llama-3.1-8b"].fields)


def _simulated_p99_wait(rho: float, variable: bool, n: int = 200_000) -> float:
    """A single server fed at random (Poisson) with service 1: deterministic, or exponential (cv2 = 1)."""
    rng = random.Random(7)
    clock = free = 0.0
    waits = []
    for _ in range(n):
        clock += rng.expovariate(rho)
        start = max(clock, free)
        waits.append(start - clock)
        free = start + (rng.expovariate(1.0) if variable else 1.0)
    return sorted(waits)[int(0.99 * n)]


@pytest.mark.parametrize("rho", [0.1, 0.3, 0.5, 0.8])
@pytest.mark.parametrize("cv2", [0.0, 1.0])
def test_the_p99_wait_is_kingmans_and_errs_long(rho, cv2):
    """Kingman's exponential tail, service (1 + cv2) ln(100 rho) / (2 (1 - rho)), is exact for exponential
    service (M/M/1) and a little long for identical prompts (M/D/1): checked against a simulated queue."""
    formula = p99_wait_ms(1000.0, rho, cv2) / 1000.0  # service 1 s, rho requests/s
    simulated = _simulated_p99_wait(rho, variable=cv2 == 1.0)
    assert simulated * 0.95 < formula < simulated * 1.45
    assert formula == pytest.approx((1 + cv2) * math.log(100 * rho) / (2 * (1 - rho)))


def test_the_wait_is_nothing_at_rest_and_everything_at_saturation():
    assert p99_wait_ms(500.0, 0.01, 1.0) == 0.0  # fewer than 1 in 100 requests find the engine busy
    assert p99_wait_ms(500.0, 2.0, 1.0) == math.inf  # 2 requests/s of 0.5 s each: saturated
    assert p99_wait_ms(500.0, 2.0, 1.0, cap_ms=1500.0) == 1500.0  # a closed load waits behind b - 1 at most


def test_prompt_variation_is_what_the_context_allows():
    def demand(prompt: int, longest: int) -> Demand:
        return Demand(input_tokens=prompt, output_tokens=256, max_prompt_tokens=longest, ttft_ms=1000, tpot_ms=None,
                      load="sequences", amount=8, floor=2, seqs_cap=256)
    assert demand(7936, 7936).prompt_cv2 == 0.0  # every prompt fills the context: all alike
    assert demand(2000, 7936).prompt_cv2 == 1.0  # room to vary like an exponential distribution
    assert demand(5000, 7936).prompt_cv2 == pytest.approx(2936 / 5000)  # at most (M - I) / I


def test_the_chunk_is_the_prompt_rounded_up_within_bounds():
    def demand(prompt: int, pinned: int | None = None) -> Demand:
        return Demand(input_tokens=prompt, output_tokens=256, max_prompt_tokens=8000, ttft_ms=1000, tpot_ms=None,
                      load="sequences", amount=8, floor=2, seqs_cap=256, batched_tokens=pinned)
    assert batched_tokens(demand(500), 16) == 2048  # short prompts: the floor
    assert batched_tokens(demand(3000), 16) == 4096
    assert batched_tokens(demand(30000), 16) == 8192  # long prompts are chunked at 8,192
    assert batched_tokens(demand(500), 4096) == 4096  # never below max_num_seqs (one decode token each)
    assert batched_tokens(demand(500, pinned=1024), 16) == 1024


def test_largest_finds_the_last_true():
    assert largest(1, 100, lambda b: b <= 37) == 37
    assert largest(1, 100, lambda b: True) == 100
    assert largest(1, 100, lambda b: b == 1) == 1


def _speed(correction=None) -> Speed:
    return Speed(load_performance_table().gpus["h100"], LLAMA_8B, Layout(), 2000, 300, correction)


def test_a_measured_correction_scales_the_prediction_and_names_itself():
    """What a measured profile supplies (measured / predicted): every prompt and decode time scales by it,
    and the figures then rest on the measurement."""
    plain, measured = _speed(), _speed(SpeedCorrection(prefill=1.5, tpot=0.8, source="measured profile (2026-12-01)"))
    assert measured.prefill_ms == pytest.approx(1.5 * plain.prefill_ms)
    assert measured.tpot(16) == pytest.approx(0.8 * plain.tpot(16))
    assert measured.service(16, 2048) == pytest.approx(1.5 * plain.service(16, 2048))
    assert measured.source == "measured profile (2026-12-01)" and plain.source.startswith("AIConfigurator")


def test_a_fit_meets_its_targets_at_peak_and_names_what_binds():
    speed = _speed()
    demand = Demand(input_tokens=2000, output_tokens=300, max_prompt_tokens=7900, ttft_ms=1000, tpot_ms=30,
                    load="sequences", amount=100, floor=2, seqs_cap=256)
    fit = fit_layout(speed, demand, kv_seqs=200)
    assert isinstance(fit, Fit)
    assert speed.tpot(fit.max_num_seqs) <= 30 < speed.tpot(fit.max_num_seqs + 1)  # the TPOT bound, exactly
    sim = fit.simulation  # the replicas are the simulation's: its p99s' upper bounds meet both targets
    assert sim.ttft_p99_high_ms <= 1000 and sim.tpot_p99_high_ms <= 30 and fit.ttft_p99_ms == round(sim.ttft_p99_ms, 1)
    below = fit.limits["below"]  # one replica fewer missed (or the floor binds)
    assert fit.binding == "availability" or below.miss == fit.binding
    assert fit.sequences_per_replica == math.ceil(100 / fit.replicas)
    few = fit_layout(speed, Demand(input_tokens=2000, output_tokens=300, max_prompt_tokens=7900, ttft_ms=1000,
                                   tpot_ms=30, load="sequences", amount=3, floor=2, seqs_cap=256), kv_seqs=200)
    assert few.replicas == 2 and few.binding == "availability"


def test_a_layout_too_slow_for_one_request_is_missed_whatever_the_replicas():
    speed = _speed()
    slow_prompt = fit_layout(speed, Demand(input_tokens=2000, output_tokens=300, max_prompt_tokens=7900, ttft_ms=10,
                                           tpot_ms=None, load="sequences", amount=1, floor=1, seqs_cap=256), kv_seqs=10)
    slow_stream = fit_layout(speed, Demand(input_tokens=2000, output_tokens=300, max_prompt_tokens=7900, ttft_ms=1000,
                                           tpot_ms=1.0, load="sequences", amount=1, floor=1, seqs_cap=256), kv_seqs=10)
    assert isinstance(slow_prompt, Miss) and slow_prompt.stage == "ttft" and slow_prompt.figure_ms == speed.prefill_ms
    assert isinstance(slow_stream, Miss) and slow_stream.stage == "tpot" and slow_stream.figure_ms == speed.tpot(1)
