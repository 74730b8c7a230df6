"""The simulation of vLLM's scheduler (plan/llm/speed/simulation.py) against exact queueing theory, an
independent step-by-step re-implementation, and its own invariants."""

from __future__ import annotations

import math
import random
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.plan.llm.speed.simulation import Lengths, Workload, p99_bounds, percentile, simulate


def fifo(service_ms: float):
    """A step time making the engine one FIFO server: prompts take ``service_ms``, nothing else takes time."""
    return lambda prefill, context, decodes, decode_context: service_ms if prefill else 0.0


def one_token(rate: float, **kw) -> Workload:
    return Workload(arrivals="poisson", rate_per_s=rate, input=Lengths(mean=100), output=Lengths(mean=1), **kw)


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.85])
def test_fixed_prompts_one_at_a_time_wait_as_pollaczek_khinchine_says(rho):
    """M/D/1: max_num_seqs 1, every request a 10 ms prompt and one token. The mean wait is rho S / (2 (1 - rho))."""
    service = 10.0
    result = simulate(step_ms=fifo(service), workload=one_token(rho / service * 1000), max_num_seqs=1,
                      max_num_batched_tokens=1000, kv_cache_tokens=10**6, requests=20000, seed=7)
    theory = service + rho * service / (2 * (1 - rho))
    assert result.ttft_mean_ms == pytest.approx(theory, rel=0.06)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_exponential_answers_one_at_a_time_wait_as_mm1_says(rho):
    """M/M/1-like: max_num_seqs 1, a 0.01 ms prompt, then (answer - 1) decode steps of 1 ms with exponential
    answers of mean 300: service is (nearly) exponential, and the p99 wait is ln(100 rho) / (mu - lambda)."""
    step = lambda prefill, context, decodes, decode_context: 0.01 if prefill else 1.0  # noqa: E731
    mean_service = 299.0 + 0.01  # an answer of mean 300 has 299 decode steps after its first token
    rate = rho / mean_service * 1000
    workload = Workload(arrivals="poisson", rate_per_s=rate, input=Lengths(mean=10),
                        output=Lengths(distribution="exponential", mean=300))
    result = simulate(step_ms=step, workload=workload, max_num_seqs=1, max_num_batched_tokens=100,
                      kv_cache_tokens=10**7, requests=20000, seed=3)
    mu, lam = 1000 / mean_service, rate
    assert result.ttft_p99_ms == pytest.approx(1000 * math.log(100 * rho) / (mu - lam), rel=0.12)
    assert result.ttft_mean_ms == pytest.approx(1000 * rho / (mu - lam), rel=0.12)


def test_a_closed_loop_keeps_the_server_busy_and_obeys_littles_law():
    """N users, no think time, one slot, 10 ms per request: every request waits for the N - 1 others."""
    result = simulate(step_ms=fifo(10.0), workload=Workload(arrivals="closed", users=6, input=Lengths(mean=50),
                      output=Lengths(mean=1)), max_num_seqs=1, max_num_batched_tokens=100, kv_cache_tokens=10**6,
                      requests=2000, seed=1)
    assert result.ttft_p50_ms == pytest.approx(60.0) and result.ttft_p99_ms == pytest.approx(60.0)
    assert result.throughput_per_s == pytest.approx(100.0, rel=0.01)


def test_a_closed_loop_with_think_time_obeys_littles_law():
    """Users cycle between thinking (Z) and being served: throughput x (mean response + Z) = users."""
    workload = Workload(arrivals="closed", users=20, think_time_s=0.5, input=Lengths(mean=50),
                        output=Lengths(mean=1))
    result = simulate(step_ms=fifo(20.0), workload=workload, max_num_seqs=1, max_num_batched_tokens=100,
                      kv_cache_tokens=10**6, requests=5000, seed=2)
    assert result.throughput_per_s * (result.ttft_mean_ms / 1000 + 0.5) == pytest.approx(20, rel=0.03)


def test_the_same_seed_gives_the_same_result_and_another_seed_another():
    kw = dict(step_ms=lambda p, c, d, dc: 5.0 + 0.01 * p + 0.2 * d, max_num_seqs=8, max_num_batched_tokens=512,
              kv_cache_tokens=20000, requests=500)
    workload = Workload(arrivals="poisson", rate_per_s=6.0, input=Lengths(distribution="exponential", mean=300),
                        output=Lengths(distribution="lognormal", mean=60, cv=1.0))
    first, again, other = (simulate(workload=workload, seed=s, **kw) for s in (11, 11, 12))
    assert first == again and first != other


def test_a_full_kv_cache_preempts_and_recomputes_and_every_request_still_finishes():
    """Room for about two contexts, sixteen slots: running requests outgrow the cache and the last is preempted."""
    workload = Workload(arrivals="poisson", rate_per_s=2.0, input=Lengths(mean=400), output=Lengths(mean=400))
    step = lambda p, c, d, dc: 2.0 + 0.01 * p + 0.1 * d  # noqa: E731
    tight = simulate(step_ms=step, workload=workload, max_num_seqs=16, max_num_batched_tokens=512,
                     kv_cache_tokens=1700, requests=300, seed=5)
    roomy = simulate(step_ms=step, workload=workload, max_num_seqs=16, max_num_batched_tokens=512,
                     kv_cache_tokens=10**6, requests=300, seed=5)
    assert tight.preemptions > 0 and tight.simulated_requests == 300
    assert roomy.preemptions == 0
    assert tight.tpot_p99_ms > roomy.tpot_p99_ms  # recomputation costs the preempted streams


def test_a_request_larger_than_the_kv_cache_is_refused():
    with pytest.raises(ValueError, match="does not fit the KV cache"):
        simulate(step_ms=fifo(1.0), workload=one_token(1.0), max_num_seqs=1, max_num_batched_tokens=100,
                 kv_cache_tokens=64, requests=10, seed=1)


@settings(max_examples=15, deadline=None)
@given(service=st.floats(1.0, 50.0), low=st.floats(0.1, 0.8), more=st.floats(0.01, 0.15))
def test_more_load_never_shortens_a_fifo_queue(service, low, more):
    """One slot, one-token requests, the same seed: a higher rate scales every arrival gap down (the same
    uniform draws), and Lindley's recursion makes every wait at least as long."""
    def p99(rho):
        return simulate(step_ms=fifo(service), workload=one_token(rho / service * 1000), max_num_seqs=1,
                        max_num_batched_tokens=1000, kv_cache_tokens=10**6, requests=400, seed=9).ttft_p99_ms
    assert p99(low) <= p99(low + more) + 1e-9


@settings(max_examples=20, deadline=None)
@given(rate=st.floats(0.5, 20.0), seqs=st.integers(1, 64), budget=st.sampled_from([256, 1024, 4096]),
       kind=st.sampled_from(["poisson", "bursty", "closed"]), cv=st.floats(0.3, 4.0),
       prompt=st.sampled_from(["fixed", "exponential", "lognormal"]), seed=st.integers(0, 2**32))
def test_any_traffic_finishes_every_request_and_its_percentiles_are_ordered(rate, seqs, budget, kind, cv, prompt, seed):
    workload = Workload(arrivals=kind, rate_per_s=rate, users=max(1, int(rate)), cv=cv, max_context_tokens=4096,
                        input=Lengths(distribution=prompt, mean=500, cv=1.0 if prompt == "lognormal" else 0.0),
                        output=Lengths(distribution="exponential", mean=50), replicas=2)
    step = lambda p, c, d, dc: 3.0 + 0.02 * p + 0.00001 * p * c + 0.05 * d + 0.00002 * d * dc  # noqa: E731
    result = simulate(step_ms=step, workload=workload, max_num_seqs=seqs, max_num_batched_tokens=budget,
                      kv_cache_tokens=8192, requests=200, seed=seed)
    assert result.simulated_requests == 200
    assert 0 < result.ttft_p50_ms <= result.ttft_p99_ms <= result.ttft_p99_high_ms
    assert result.ttft_p99_low_ms <= result.ttft_p99_ms
    assert 3.0 <= result.tpot_p50_ms <= result.tpot_p99_ms <= result.tpot_p99_high_ms
    assert result.goodput_per_s == pytest.approx(result.throughput_per_s)  # no targets: every request counts


def test_the_p99_interval_brackets_the_percentile_with_order_statistics():
    values = [float(v) for v in range(1, 2001)]
    low, high = p99_bounds(values)
    assert low < percentile(values, 99) < high
    assert (low, high) == (1971.0, 1989.0)  # 1980 -/+ 1.96 sqrt(2000 x 0.99 x 0.01) = 1980 -/+ 8.7


# ------------------------------------------------------------------------- an independent re-implementation
def eight_b_like(p, c, d, dc):
    """A step time of the 8B on an L40S's shape: weights read once, compute per token, attention per pair."""
    m = p + d
    gemm = ((m * 16e9 / 181e12) ** 4 + (15e9 / 864e9) ** 4) ** 0.25 * 1000
    return gemm + p * (c - p / 2) * 1.3e-7 + d * dc * 2.5e-6 + 0.4


@pytest.mark.parametrize("seqs, kv_tokens", [(32, 200_000), (24, 45_000)])
def test_an_independent_step_by_step_simulation_agrees_on_the_p99_ttft(seqs, kv_tokens):
    """The same requests (a timestamped trace: the same arrivals and lengths for both) through the module and
    through naive_ttfts: the module's runs of decode steps (taken at their mean context) agree with the plain
    loop's p99 TTFT within 3% (the second case's KV cache preempts over a hundred times)."""
    rng = random.Random(21)
    count, measured = 3600, 2500
    pairs = tuple((max(1, min(6000, round(rng.expovariate(1 / 1500)))), max(2, min(1500, round(rng.expovariate(1 / 150)))))
                  for _ in range(count))
    gaps = tuple(rng.expovariate(3.2) for _ in range(count))
    workload = Workload(arrivals="poisson", rate_per_s=len(gaps) / sum(gaps), trace=pairs, trace_gaps_s=gaps)
    result = simulate(step_ms=eight_b_like, workload=workload, max_num_seqs=seqs, max_num_batched_tokens=2048,
                      kv_cache_tokens=kv_tokens, requests=measured, seed=1)
    arrivals = [sum(gaps[:i + 1]) * 1000 for i in range(count)]
    requests = [(arrivals[i], *pairs[i]) for i in range(count)]
    ttfts = plain_ttfts(requests, seqs, kv_tokens // 16)
    warmup = measured // 10
    expected = percentile(sorted(ttfts[warmup:warmup + measured]), 99)
    assert result.ttft_p99_ms == pytest.approx(expected, rel=0.03)
    assert result.ttft_p99_ms > 2 * eight_b_like(1500, 1500, 0, 0)  # a queue formed: the check is not vacuous


def plain_ttfts(requests, seqs, kv_blocks):
    """Every request's TTFT through vLLM's V1 schedule() written out plainly, one step at a time, calling the
    step time for every step (no runs of decode steps, no grid)."""
    state = [dict(arrival=a, prompt=p, output=o, computed=0, generated=0, blocks=0, first=None) for a, p, o in requests]
    naive_loop(eight_b_like, state, seqs, 2048, kv_blocks)
    return [r["first"] - r["arrival"] for r in state]


def naive_loop(step, state, max_num_seqs, budget, kv_blocks, block_size=16):
    pending = deque(state)
    waiting, running, clock, free, done = deque(), [], 0.0, kv_blocks, 0
    while done < len(state):
        while pending and pending[0]["arrival"] <= clock:
            waiting.append(pending.popleft())
        if not running and not waiting:
            clock = pending[0]["arrival"]
            continue
        free_ref = [free]
        plan = _naive_schedule(running, waiting, budget, max_num_seqs, block_size, free_ref)
        free = free_ref[0]
        if not plan:
            continue
        clock += _naive_step_ms(step, plan)
        for r, new in plan:
            r["computed"] += new
            if r["computed"] == r["prompt"] + r["generated"]:
                r["generated"] += 1
                r["first"] = clock if r["first"] is None else r["first"]
                if r["generated"] == r["output"]:
                    running.remove(r)
                    free += r["blocks"]
                    done += 1


def _naive_schedule(running, waiting, budget, max_num_seqs, block_size, free_ref):
    left, plan, preempted = budget, [], False
    for r in list(running):
        if r not in running or left == 0:
            break
        new = min(r["prompt"] + r["generated"] - r["computed"], left)
        need = math.ceil((r["computed"] + new) / block_size) - r["blocks"]
        while need > free_ref[0] and r in running:
            victim = running.pop()
            free_ref[0] += victim["blocks"]
            victim.update(blocks=0, computed=0)
            waiting.appendleft(victim)
            preempted = True
        if r not in running:
            break
        r["blocks"] += need
        free_ref[0] -= need
        plan.append((r, new))
        left -= new
    while not preempted and waiting and left > 0 and len(running) < max_num_seqs:
        r = waiting[0]
        new = min(r["prompt"] + r["generated"], left)
        need = math.ceil(new / block_size)
        if need > free_ref[0]:
            break
        waiting.popleft()
        running.append(r)
        r["blocks"] = need
        free_ref[0] -= need
        plan.append((r, new))
        left -= new
    return plan


def _naive_step_ms(step, plan):
    decodes = [r for r, new in plan if new == 1 and r["generated"]]
    prompts = [(r, new) for r, new in plan if not (new == 1 and r["generated"])]
    tokens = sum(new for _, new in prompts)
    work = sum(new * (r["computed"] + new / 2) for r, new in prompts)
    context = tokens + max(0.0, work / tokens - tokens / 2) if tokens else 0
    mean = sum(r["computed"] + 1 for r in decodes) / len(decodes) if decodes else 0
    return step(tokens, context, len(decodes), mean)


@pytest.mark.parametrize("cv, replicas", [(2.0, 3), (3.0, 40), (0.5, 7)])
def test_a_bursty_stream_split_over_replicas_has_the_split_streams_mean_and_variance(cv, replicas):
    """One replica's share of a bursty (gamma renewal) stream, drawn as one gamma gap of a geometric number of the
    stream's gaps: its gaps' mean is replicas x the stream's, and their variance E[K] var(X) + var(K) E[X]^2."""
    from modelfleet.plan.llm.speed.workload import open_gaps_ms
    rate = 4.0
    gaps = open_gaps_ms(Workload(arrivals="bursty", rate_per_s=rate, cv=cv, replicas=replicas), random.Random(3))
    sample = [next(gaps) for _ in range(60_000)]
    mean = sum(sample) / len(sample)
    variance = sum((g - mean) ** 2 for g in sample) / len(sample)
    mu, p = 1000.0 / rate, 1.0 / replicas
    expected_variance = (1 / p) * (cv * mu) ** 2 + (1 - p) / p**2 * mu**2
    assert mean == pytest.approx(mu / p, rel=0.03)
    assert variance == pytest.approx(expected_variance, rel=0.08)
