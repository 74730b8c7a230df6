"""Fitting one layout to an LLM's demand: max_num_seqs, max_num_batched_tokens, replicas, figures at peak.

The rules are llm_speed's module docstring's; this module applies them in order:

1. a layout is missed when one prompt alone exceeds the p99 TTFT, or one stream alone the p99 TPOT: no number
   of replicas rescues it;
2. ``max_num_seqs``: the most sequences whose TPOT stays within the p99 (or the KV cache, or the stack's cap,
   whichever is lower);
3. the load one replica may carry: the most sequences (or requests/s) at which the p99 TTFT, queueing
   included, still holds;
4. replicas: the peak over that, at least the availability floor; the constraint that set the count binds.
"""

from __future__ import annotations

import functools
import math

from .speed.load import Demand, Fit, Miss, Speed, batched_tokens, largest, p99_wait_ms, smallest


@functools.lru_cache(maxsize=4096)
def fit_layout(speed: Speed, demand: Demand, kv_seqs: int) -> Fit | Miss:
    """The cheapest way one layout serves ``demand`` (``kv_seqs``: sequences its KV cache holds)."""
    if speed.prefill_ms > demand.ttft_ms:
        return Miss("ttft", speed.prefill_ms, f"one {demand.input_tokens:,}-token prompt on an idle replica takes "
                    f"{speed.prefill_ms:,.0f} ms to its first token, more than the p99 TTFT of {demand.ttft_ms:,.0f} ms")
    one = speed.tpot(1)
    if demand.tpot_ms is not None and one > demand.tpot_ms:
        return Miss("tpot", one, f"one stream alone decodes at {one:,.1f} ms per token, more than the p99 TPOT "
                    f"of {demand.tpot_ms:g} ms")
    seqs, seq_limit = _max_num_seqs(speed, demand, kv_seqs)
    chunk = batched_tokens(demand, seqs)
    alone = speed.service(1, chunk)  # chunked, a prompt takes a step per chunk
    if alone > demand.ttft_ms:
        return Miss("ttft", alone, f"one {demand.input_tokens:,}-token prompt in {math.ceil(demand.input_tokens / chunk)} "
                    f"chunk(s) of {chunk:,} tokens takes {alone:,.0f} ms, more than the p99 TTFT of "
                    f"{demand.ttft_ms:,.0f} ms")
    capacity, ttft_binds = _capacity(speed, demand, seqs, chunk)
    replicas, binding, needed = _replicas(demand, capacity, ttft_binds, seq_limit)
    batch, rate, shortfall = _at_peak(speed, demand, seqs, chunk, replicas)
    limits = {"seq_limit": seq_limit, "capacity": capacity, "needed": needed, "kv_seqs": kv_seqs}
    # The figures as the plan keeps them (0.1 ms, TPOT 0.01 ms, 0.1 token/s), so every text quoting them agrees.
    return Fit(max_num_seqs=seqs, max_num_batched_tokens=chunk, replicas=replicas, sequences_per_replica=batch,
               prefill_ms=round(speed.prefill_ms, 1), ttft_p99_ms=round(_ttft(speed, demand, batch, chunk, rate), 1),
               tpot_ms=round(speed.tpot(batch), 2), tpot_at_max_ms=round(speed.tpot(seqs), 2),
               output_tokens_per_s_per_replica=round(rate * demand.output_tokens, 1), binding=binding, limits=limits,
               shortfall=shortfall)


def _max_num_seqs(speed: Speed, demand: Demand, kv_seqs: int) -> tuple[int, str]:
    if demand.pinned_seqs is not None:
        return demand.pinned_seqs, "overrides.max_num_seqs"
    cap = max(1, min(kv_seqs, demand.seqs_cap))
    limit = "memory" if kv_seqs <= demand.seqs_cap else "max_num_seqs cap"
    if demand.tpot_ms is None:
        return cap, limit
    target = demand.tpot_ms
    seqs = largest(1, cap, lambda b: speed.tpot(b) <= target)
    return seqs, "tpot" if seqs < cap else limit


def _ttft(speed: Speed, demand: Demand, batch: int, chunk: int, rate: float) -> float:
    """p99 TTFT with ``batch`` sequences in flight and prompts arriving at ``rate`` per second."""
    service = speed.service(batch, chunk)
    cap = (batch - 1) * service if demand.requests_per_s is None else math.inf  # a closed load waits on b-1
    return service + p99_wait_ms(service, rate, demand.prompt_cv2, cap)


def _capacity(speed: Speed, demand: Demand, seqs: int, chunk: int) -> tuple[float, bool]:
    """The load one replica carries within the p99 TTFT: sequences (closed load) or requests/s, and whether
    the TTFT (rather than max_num_seqs) set it."""
    def ok(b: int) -> bool:
        return _ttft(speed, demand, b, chunk, speed.rate(b, chunk)) <= demand.ttft_ms

    if demand.requests_per_s is None:
        best = largest(1, seqs, ok)
        return float(best), best < seqs
    if ok(1):
        best = largest(1, seqs, ok)
        return speed.rate(best, chunk), best < seqs
    service = speed.service(1, chunk)  # below one sequence's own rate: the arrival rate the p99 allows
    low, high = 0.0, speed.rate(1, chunk)
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if service + p99_wait_ms(service, mid, demand.prompt_cv2) <= demand.ttft_ms else (low, mid)
    return low, True


def _replicas(demand: Demand, capacity: float, ttft_binds: bool, seq_limit: str) -> tuple[int, str, int]:
    load = demand.amount if demand.requests_per_s is None else demand.requests_per_s
    needed = max(1, math.ceil(load / capacity - 1e-9)) if capacity > 0 else 10**9
    if demand.pinned_replicas is not None:
        return demand.pinned_replicas, demand.pinned_by, needed
    if needed < demand.floor:
        return demand.floor, "availability", needed
    return needed, "ttft" if ttft_binds else seq_limit, needed


def _at_peak(speed: Speed, demand: Demand, seqs: int, chunk: int, replicas: int) -> tuple[int, float, str | None]:
    """Sequences in flight per replica at peak and its request rate; what a short replica count misses."""
    if demand.requests_per_s is None:
        wanted = math.ceil(demand.amount / replicas)
        batch = min(seqs, wanted)
        short = None if wanted <= seqs else (f"{replicas} replica(s) x max_num_seqs {seqs} run {replicas * seqs:,} of "
                                             f"the {demand.amount:,.0f} sequences at peak")
        return batch, speed.rate(batch, chunk), short
    rate = demand.requests_per_s / replicas
    if speed.rate(seqs, chunk) < rate:
        most = speed.rate(seqs, chunk) * replicas
        return seqs, speed.rate(seqs, chunk), (f"{replicas} replica(s) complete at most {most:,.1f} of the "
                                               f"{demand.requests_per_s:,.1f} requests/s at peak")
    return smallest(1, seqs, lambda b: speed.rate(b, chunk) >= rate), rate, None
