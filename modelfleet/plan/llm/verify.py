"""Choosing max_num_seqs and replicas on the simulation of vLLM's scheduler (speed/peak.py).

The closed form (fit.py) is a first guess only: it can be several times pessimistic (a closed loop never
queues as Kingman's formula assumes) or optimistic (Poisson arrivals queue for a max_num_seqs slot, which it
does not model). From its guess the search gallops down while the simulation passes, or up while it fails,
then bisects: the fewest replicas whose simulated p99 TTFT and p99 TPOT (their 95% upper bounds) meet the
SLA, at least the availability floor. At each count ``max_num_seqs`` is the closed form's (the most whose
steady TPOT meets the target), else the most the KV cache and the stack allow (more slots, less queueing).

Cost: each count is screened with a short run (a quarter of the requests) and failed on it when even the lower
bound of its p99's interval misses; a replica count whose per-replica rate exceeds 1.25 x the closed form's throughput at max_num_seqs is
failed without simulating (it is unstable); ``most`` (the most replicas that can still beat the cheapest
layout verified so far) stops the search, so layouts that cannot win are not simulated further.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .speed.load import Demand, Speed, batched_tokens
from .speed.peak import SCREEN_REQUESTS, SIMULATED_REQUESTS, Traffic, clearly_misses, meets, simulated
from .speed.simulation import SimulationResult
from .speed.workload import Lengths

# Beyond this multiple of the closed form's steady throughput a replica's queue grows without bound.
UNSTABLE_FACTOR = 1.25
MAX_REPLICAS = 1000


@dataclass(frozen=True)
class Verdict:
    """The simulation at one replica count: the max_num_seqs used, its result, what misses (None: meets)."""

    replicas: int
    max_num_seqs: int
    max_num_batched_tokens: int
    result: SimulationResult | None  # None: not simulated (unstable)
    miss: str | None


class Verifier:
    """The simulated verdicts of one layout for one demand, memoised per replica count."""

    def __init__(self, speed: Speed, demand: Demand, seq_options: tuple[int, ...], kv_tokens: int) -> None:
        self.speed, self.demand, self.options, self.kv_tokens = speed, demand, seq_options, kv_tokens
        self.traffic = demand.traffic or fixed_traffic(demand)
        self.verdicts: dict[int, Verdict] = {}
        self.runs = 0

    def __call__(self, replicas: int) -> Verdict:
        if replicas not in self.verdicts:
            self.verdicts[replicas] = self._verdict(replicas)
        return self.verdicts[replicas]

    def _verdict(self, replicas: int) -> Verdict:
        first: Verdict | None = None
        for seqs in self.options:
            chunk = batched_tokens(self.demand, seqs)
            if self._unstable(replicas, seqs, chunk):
                verdict = Verdict(replicas, seqs, chunk, None, "ttft")
            else:
                verdict = self._simulated(replicas, seqs, chunk)
            if verdict.miss is None:
                return verdict
            first = first or verdict
            if verdict.miss == "tpot":  # more sequences at once only slow each stream further
                break
        return first

    def _simulated(self, replicas: int, seqs: int, chunk: int) -> Verdict:
        """A short screening run first: a count whose p99 misses even at its interval's lower bound is failed
        on it; every other verdict, and every pass, rests on the full run."""
        demand = self.demand
        for requests in (SCREEN_REQUESTS, SIMULATED_REQUESTS):
            self.runs += 1
            result = simulated(self.speed, self.traffic, seqs, chunk, self.kv_tokens, replicas, demand.ttft_ms,
                               demand.tpot_ms, demand.seed, requests)
            if requests == SCREEN_REQUESTS and clearly_misses(result, demand.ttft_ms, demand.tpot_ms):
                break
        return Verdict(replicas, seqs, chunk, result, meets(result, demand.ttft_ms, demand.tpot_ms))

    def _unstable(self, replicas: int, seqs: int, chunk: int) -> bool:
        rate = self.traffic.rate_per_s if self.traffic.arrivals != "closed" else 0.0
        return rate / replicas > UNSTABLE_FACTOR * self.speed.rate(seqs, chunk)

    def least_replicas(self, guess: int, floor: int, most: int) -> int | None:
        """The fewest replicas in [floor, most] that meet the SLA (module docstring); None: none does."""
        return smallest_passing(max(floor, min(guess, most)), floor, most, lambda r: self(r).miss is None)


def smallest_passing(guess: int, low: int, high: int, ok: Callable[[int], bool]) -> int | None:
    """The smallest ``r`` in [low, high] with ``ok(r)`` for a predicate false below some point and true from it:
    gallop from ``guess`` (down while it holds, up while it does not), then bisect."""
    if ok(guess):
        passing, step = guess, 1
        while passing > low:
            probe = max(low, passing - step)
            if not ok(probe):
                return _bisect(probe, passing, ok)
            passing, step = probe, step * 2
        return passing
    failing, step = guess, 1
    while failing < high:
        probe = min(high, failing + step)
        if ok(probe):
            return _bisect(failing, probe, ok)
        failing, step = probe, step * 2
    return None


def _bisect(failing: int, passing: int, ok: Callable[[int], bool]) -> int:
    while passing - failing > 1:
        mid = (failing + passing) // 2
        failing, passing = (failing, mid) if ok(mid) else (mid, passing)
    return passing


def fixed_traffic(demand: Demand) -> Traffic:
    """The traffic a demand without a declared one means: fixed lengths at the means; a closed loop of the
    sequences, or Poisson arrivals at the rate."""
    lengths = Lengths(mean=demand.input_tokens), Lengths(mean=demand.output_tokens)
    context = demand.max_prompt_tokens + demand.output_tokens
    if demand.requests_per_s is None:
        return Traffic("closed", users=math.ceil(demand.amount), input=lengths[0], output=lengths[1],
                       max_context_tokens=context)
    return Traffic("poisson", rate_per_s=demand.requests_per_s, input=lengths[0], output=lengths[1],
                   max_context_tokens=context)


def replicas_lower_bound(speed: Speed, demand: Demand, traffic: Traffic, seqs: int) -> int:
    """Replicas no layout of this speed can do with fewer: the stream's rate over 1.25 x a replica's steady
    throughput at ``seqs`` in flight; for a closed loop, the users' rate if every request took the most the SLA
    allows (its TTFT and output tokens at the TPOT target) plus the think time."""
    capacity = UNSTABLE_FACTOR * speed.rate(seqs, batched_tokens(demand, seqs))
    if traffic.arrivals != "closed":
        return max(1, math.ceil(traffic.rate_per_s / capacity - 1e-9))
    tpot = demand.tpot_ms if demand.tpot_ms is not None else speed.tpot(seqs)
    cycle_s = (demand.ttft_ms + (demand.output_tokens - 1) * tpot) / 1000.0 + traffic.think_time_s
    return max(1, math.ceil(traffic.users / cycle_s / capacity - 1e-9))
