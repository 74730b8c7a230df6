"""A discrete-event simulation of vLLM replicas under declared traffic: what the plan's p50/p99 TTFT and TPOT
rest on.

The replica is vLLM's V1 scheduler (replica.py: continuous batching, chunked prefill within the token budget
with running requests first, ``max_num_seqs``, FCFS waiting, KV blocks with preemption by recompute); the
traffic is workload.py's (Poisson, bursty or closed-loop arrivals; fixed, random, histogram or traced
lengths; spread over the replicas at random as a Kubernetes Service spreads them). An open stream is thinned
to one replica; a closed loop's users go from replica to replica, so its replicas are simulated together, on
one clock (at most ``CLOSED_REPLICAS`` of them: a larger fleet is simulated as that many replicas with their
share of the users, the same users per replica): a replica's pending run of decode steps is cut short when
an arrival it could admit comes.

Each request's figures are those ``vllm bench serve`` reports: TTFT from arrival to first token; TPOT
``(end - first token) / (output tokens - 1)`` (requests of more than one output token); ITL each gap between
tokens. The first ``requests // 10`` requests (at least twice the users of a closed loop, up to ``MAX_WARMUP``) warm the replicas up
and are not measured, nor those sent after the last measured one (they keep the load on until it ends).

A p99 from ``n`` samples is uncertain: the ``ceil(0.99 n + 1.96 sqrt(0.0099 n))``-th smallest sample bounds it
from above with 97.5% confidence if samples were independent (the order statistic's binomial interval); the
plan compares that bound, not the point, with the SLA. Deterministic: the same seed gives the same result.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, replace
from typing import Protocol

from .replica import Replica, Request
from .workload import Lengths, Workload, open_gaps_ms, request_lengths

__all__ = ["Overloaded", "StepTime", "Workload", "Lengths", "SimulationResult", "simulate", "percentile", "p99_bounds"]

QUEUE_LIMIT = 4  # x the run's requests waiting at one replica (and at least MIN_QUEUE_LIMIT): the run stops,
MIN_QUEUE_LIMIT = 25_000  # Overloaded (its queue only grows: no steady state, and each arrival costs time)
MAX_WARMUP = 20_000  # warm-up requests at most: a loop of more users is measured before all have sent twice (they
# all send at once at the start, so it is measured nearer that burst: the figures err long, never short)
CLOSED_REPLICAS = 4  # a closed loop over more replicas is simulated on this many, with their share of the users
CONFIDENCE_Z = 1.959963984540054  # two-sided 95%: each bound holds with 97.5%


class Overloaded(Exception):
    """The run's queue grew past ``QUEUE_LIMIT`` times its requests: no steady state to measure."""


class StepTime(Protocol):
    def __call__(self, prefill_tokens: int, prefill_context: float, decodes: int, decode_context: float) -> float:
        """Milliseconds of one engine step: ``prefill_tokens`` prompt tokens whose context ends at
        ``prefill_context``, beside ``decodes`` sequences each adding a token to ``decode_context`` tokens (the
        contexts are means over the step's sequences, so not whole numbers). Called for every step the
        simulation takes: it must be cheap (performance.step_timer memoises the performance model's parts)."""
        ...


@dataclass(frozen=True, kw_only=True)
class SimulationResult:
    """Figures over the measured requests (module docstring); rates per replica."""

    ttft_p50_ms: float
    ttft_p99_ms: float
    ttft_p99_low_ms: float  # the p99's 95% interval (order statistics)
    ttft_p99_high_ms: float
    ttft_mean_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    tpot_p99_low_ms: float
    tpot_p99_high_ms: float
    itl_p99_ms: float
    goodput_per_s: float  # requests per second within both targets (all of them when none is given)
    throughput_per_s: float
    preemptions: int
    simulated_requests: int  # measured


def simulate(*, step_ms: StepTime, workload: Workload, max_num_seqs: int, max_num_batched_tokens: int,
             kv_cache_tokens: int, requests: int, seed: int, block_size: int = 16) -> SimulationResult:
    """Simulate ``requests`` measured requests of ``workload`` on its replicas (module docstring)."""
    closed = workload.arrivals == "closed"
    if closed and workload.replicas > CLOSED_REPLICAS:
        # users per replica kept, fewer replicas simulated: the cost stays bounded however large the fleet
        share = CLOSED_REPLICAS / workload.replicas
        workload = replace(workload, replicas=CLOSED_REPLICAS, users=max(1, round(workload.users * share)))
    replicas = [Replica(step_time=step_ms, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                        kv_blocks=kv_cache_tokens // block_size, block_size=block_size)
                for _ in range(workload.replicas if closed else 1)]
    warmup = max(requests // 10, min(2 * workload.users, MAX_WARMUP) if closed else 0)
    done = _Run(workload, replicas, random.Random(seed), warmup, warmup + requests).run()
    return _result(done, replicas, workload)


ARRIVAL, STEP_END = 0, 1  # at equal times an arrival comes first: the step then starting sees it


class _Run:
    """The event loop: arrivals and the ends of replicas' steps, in time order."""

    def __init__(self, workload: Workload, replicas: list[Replica], rng: random.Random, warmup: int,
                 total: int) -> None:
        self.workload, self.replicas, self.rng = workload, replicas, rng
        self.warmup, self.total, self.issued, self.pending = warmup, total, 0, total - warmup
        self.lengths = request_lengths(workload, rng)
        self.events: list[tuple[float, int, int, int, int]] = []  # (ms, kind, order, replica, user or version)
        self.versions = [0] * len(replicas)
        self.measured: list[Request] = []
        self.think_ms = workload.think_time_s * 1000.0
        self.queue_limit = max(QUEUE_LIMIT * total, MIN_QUEUE_LIMIT)
        if workload.arrivals == "closed":
            for user in range(workload.users):
                self._send(0.0, user)
        else:
            self.gaps = open_gaps_ms(workload, rng)
            self._send(next(self.gaps), -1)

    def _send(self, time: float, user: int) -> None:
        target = self.rng.randrange(len(self.replicas)) if len(self.replicas) > 1 else 0
        heapq.heappush(self.events, (time, ARRIVAL, self.issued, target, user))
        self.issued += 1

    def run(self) -> list[Request]:
        while self.pending > 0:
            time, kind, order, index, extra = heapq.heappop(self.events)
            if kind == ARRIVAL:
                self._arrive(time, order, index, extra)
            elif extra == self.versions[index]:
                replica = self.replicas[index]
                self._collect(replica.complete())
                if replica.idle():
                    replica.busy = False
                else:
                    self._begin(index)
        return self.measured

    def _arrive(self, time: float, sequence: int, index: int, user: int) -> None:
        prompt, output = self.lengths()
        replica = self.replicas[index]
        replica.waiting.append(Request(time, prompt, output, user, self.warmup <= sequence < self.total))
        if len(replica.waiting) > self.queue_limit:
            raise Overloaded(f"{len(replica.waiting):,} requests waiting at one replica: arrivals outpace it")
        if not replica.busy:
            replica.now = max(replica.now, time)  # an engine idle since its last step ended
            replica.busy = True
            self._begin(index)
        else:
            end = replica.cut(time)
            if end is not None:
                self._schedule_end(index, end)
        if user < 0:
            self._send(time + next(self.gaps), -1)

    def _begin(self, index: int) -> None:
        end, finished = self.replicas[index].begin()
        self._collect(finished)
        self._schedule_end(index, end)

    def _schedule_end(self, index: int, end: float) -> None:
        self.versions[index] += 1
        heapq.heappush(self.events, (end, STEP_END, 0, index, self.versions[index]))

    def _collect(self, finished: list[Request]) -> None:
        for request in finished:
            if request.measured:
                self.measured.append(request)
                self.pending -= 1
            if request.user >= 0:
                self._send(request.finish + self.think_ms, request.user)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` percentile (0-100) of sorted ``values``, interpolated linearly (numpy's default, as vllm bench)."""
    if not values:
        return 0.0
    position = (len(values) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def p99_bounds(values: list[float]) -> tuple[float, float]:
    """The p99's 95% interval from sorted ``values``: the order statistics at 0.99 n -/+ 1.96 sqrt(0.0099 n)."""
    n = len(values)
    if not n:
        return 0.0, 0.0
    spread = CONFIDENCE_Z * math.sqrt(n * 0.99 * 0.01)
    low = max(0, math.floor(0.99 * n - spread) - 1)
    high = min(n - 1, math.ceil(0.99 * n + spread) - 1)
    return values[low], values[high]


def _result(done: list[Request], replicas: list[Replica], workload: Workload) -> SimulationResult:
    ttft = sorted(r.first - r.arrival for r in done)
    tpot = sorted((r.finish - r.first) / (r.output - 1) for r in done if r.output > 1)
    span_s = (max(r.finish for r in done) - min(r.arrival for r in done)) / 1000.0 * len(replicas)
    good = sum(1 for r in done if _within(r, workload))
    ttft_low, ttft_high = p99_bounds(ttft)
    tpot_low, tpot_high = p99_bounds(tpot)
    return SimulationResult(
        ttft_p50_ms=percentile(ttft, 50), ttft_p99_ms=percentile(ttft, 99), ttft_p99_low_ms=ttft_low,
        ttft_p99_high_ms=ttft_high, ttft_mean_ms=sum(ttft) / len(ttft),
        tpot_p50_ms=percentile(tpot, 50), tpot_p99_ms=percentile(tpot, 99), tpot_p99_low_ms=tpot_low,
        tpot_p99_high_ms=tpot_high, itl_p99_ms=_weighted_p99(replicas),
        goodput_per_s=good / span_s, throughput_per_s=len(done) / span_s,
        preemptions=sum(r.preemptions for r in replicas), simulated_requests=len(done))


def _within(request: Request, workload: Workload) -> bool:
    ttft_ok = workload.ttft_target_ms is None or request.first - request.arrival <= workload.ttft_target_ms
    tpot = (request.finish - request.first) / (request.output - 1) if request.output > 1 else 0.0
    return ttft_ok and (workload.tpot_target_ms is None or tpot <= workload.tpot_target_ms)


def _weighted_p99(replicas: list[Replica]) -> float:
    gaps: dict[float, int] = {}
    for replica in replicas:
        for gap, count in replica.gaps.items():
            gaps[gap] = gaps.get(gap, 0) + count
    total = sum(gaps.values())
    seen = 0
    for gap in sorted(gaps):
        seen += gaps[gap]
        if seen >= 0.99 * total:
            return gap
    return 0.0
