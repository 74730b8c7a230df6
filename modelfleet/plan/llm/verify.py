"""Choosing max_num_seqs and replicas on the simulation of vLLM's scheduler (speed/peak.py).

The closed form (fit.py) is a first guess only: it can be several times pessimistic (a closed loop never
queues as Kingman's formula assumes) or optimistic (Poisson arrivals queue for a max_num_seqs slot, which it
does not model). From its guess the search gallops down while the simulation passes, or up while it fails,
then bisects: the fewest replicas whose simulated p99 TTFT and p99 TPOT (their 95% upper bounds) meet the
SLA, at least the availability floor. At each count ``max_num_seqs`` is the closed form's (the most whose
steady TPOT meets the target), else the most the KV cache and the stack allow (more slots, less queueing).

Cost: the search runs on short screening runs (a fifth of the requests, judged on their p99 point estimates); from the fewest replicas that pass the screen, full runs (judged on the p99s' upper bounds)
gallop up (one more, three more, seven more...) or, when the first passes, down (the count below it is run in
full too: a screen's p99 is noisy, and may miss where the full run meets), and bisect to the fewest that pass. A replica count whose per-replica rate exceeds 1.25 x the closed form's throughput at max_num_seqs is
failed without simulating (it is unstable); ``most`` (the most replicas that can still beat the cheapest
layout verified so far) stops the search once the count it would find is above it, so layouts that cannot win
are not simulated further; the search's path never depends on it (``Verifier.least_replicas``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from .speed.load import Demand, Speed, batched_tokens
from .speed.peak import SCREEN_REQUESTS, SIMULATED_REQUESTS, Traffic, meets, simulated
from .speed.simulation import SimulationResult
from .speed.workload import Lengths

# Beyond this multiple of the closed form's steady throughput a replica's queue grows without bound.
UNSTABLE_FACTOR = 1.25
HOPELESS_FACTOR = 100  # an open stream this many times a replica count's capacity overflows any run (_hopeless)
MAX_CLOSED_USERS = 20_000  # closed loops of more users are simulated as open arrivals (open_for_many)
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
    """The simulated verdicts of one layout for one demand, memoised per replica count: ``screen`` (a short run,
    judged on its p99s' point estimates: its interval's upper end is its largest sample or near it, too noisy
    to steer by) and ``verify`` (the full run, judged on the p99s' upper bounds)."""

    def __init__(self, speed: Speed, demand: Demand, seq_options: tuple[int, ...], kv_tokens: int) -> None:
        self.speed, self.demand, self.options, self.kv_tokens = speed, demand, seq_options, kv_tokens
        self.traffic = open_for_many(speed, demand, demand.traffic or fixed_traffic(demand))
        self.screens: dict[int, Verdict] = {}
        self.verdicts: dict[int, Verdict] = {}
        self.runs = 0

    def screen(self, replicas: int) -> Verdict:
        if replicas not in self.screens:
            self.screens[replicas] = self._verdict(replicas, SCREEN_REQUESTS)
        return self.screens[replicas]

    def verify(self, replicas: int) -> Verdict:
        if replicas not in self.verdicts:
            self.verdicts[replicas] = self._verdict(replicas, SIMULATED_REQUESTS)
        return self.verdicts[replicas]

    def _verdict(self, replicas: int, requests: int) -> Verdict:
        first: Verdict | None = None
        screened = self.screens.get(replicas)
        for seqs in self.options:
            if screened is not None and screened.max_num_seqs != seqs and screened.miss is None:
                continue  # the full run starts from the option the screen passed with
            verdict = self._run(replicas, seqs, requests)
            if verdict.miss is None:
                return verdict
            first = first or verdict
            if verdict.miss == "tpot":  # more sequences at once only slow each stream further
                break
        return first

    def _run(self, replicas: int, seqs: int, requests: int, force: bool = False) -> Verdict:
        chunk, demand = batched_tokens(self.demand, seqs), self.demand
        if (self._hopeless(replicas, seqs, chunk) if force else self._unstable(replicas, seqs, chunk)):
            return Verdict(replicas, seqs, chunk, None, "ttft")
        self.runs += 1
        result = simulated(self.speed, self.traffic, seqs, chunk, self.kv_tokens, replicas, demand.ttft_ms,
                           demand.tpot_ms, demand.seed, requests)
        if result is None:  # its queue grew without bound (simulation.Overloaded)
            return Verdict(replicas, seqs, chunk, None, "ttft")
        judged = meets(result, demand.ttft_ms, demand.tpot_ms, 1.0 if requests == SIMULATED_REQUESTS else 0.0)
        return Verdict(replicas, seqs, chunk, result, judged)

    def _unstable(self, replicas: int, seqs: int, chunk: int) -> bool:
        """Beyond what the replicas can ever complete: an open stream's rate, or the rate a closed loop's users
        would send at if the SLA held (replicas_lower_bound), above 1.25 x their steady throughput."""
        return replicas < replicas_lower_bound(self.speed, self.demand, self.traffic, seqs)

    def _hopeless(self, replicas: int, seqs: int, chunk: int) -> bool:
        """An open stream so far beyond the replicas' capacity that even a short run would end Overloaded: it
        completes its ~1.1 x SCREEN_REQUESTS requests in T = that / capacity while λT arrive, so its queue passes
        MIN_QUEUE_LIMIT once λ / capacity > 1 + MIN_QUEUE_LIMIT / (1.1 x SCREEN_REQUESTS), about 77; beyond
        HOPELESS_FACTOR times the (optimistic) 1.25 x steady throughput it is not simulated (a fuzzed fleet of a
        million users spent seconds queueing them one by one)."""
        if self.traffic.arrivals == "closed":
            return False
        capacity = UNSTABLE_FACTOR * self.speed.rate(seqs, chunk) * replicas
        return self.traffic.rate_per_s > HOPELESS_FACTOR * capacity

    def least_replicas(self, guess: int, floor: int, most: int) -> int | None:
        """The fewest replicas from ``floor`` that meet the SLA (module docstring); None when none up to
        MAX_REPLICAS does, or when the count found would be more than ``most``.

        The verdicts are not monotone in replicas: near the target a count can pass where one more fails (the
        runs' noise), and a closed loop of fixed lengths runs in step on one replica while random routing over
        two lets prompts collide (p99 TTFT 4.8 s on one replica, 20.5 s on two: tests/plan/test_llm_verify.py).
        So the path the search takes never depends on ``most``: a bounded search (a layout that must beat
        the cheapest so far, may_serve_within) finds what the unbounded one finds, or None when that is more
        than ``most``, and stops early only once every count it could still find is above ``most``. The floor
        is tried first: the cheapest count, and the one availability alone binds."""
        if floor > most:
            return None  # every count it could find is above ``most``
        if self.screen(floor).miss is None and self.verify(floor).miss is None:
            return floor
        first = max(floor, min(guess, MAX_REPLICAS))
        if first < MAX_REPLICAS and self.screen(first).miss is not None and \
                self.screen(MAX_REPLICAS).miss is not None:
            return None  # not even the most replicas allowed pass: none fewer will
        start = smallest_passing(first, floor, MAX_REPLICAS, lambda r: self.screen(r).miss is None, cut=most)
        if start is None or start > most:
            return None
        if start < MAX_REPLICAS and self.verify(start).miss is not None and \
                self.verify(MAX_REPLICAS).miss is not None:
            return None  # the same for the full runs: the most replicas miss, so every count between does
        # down to the floor, not to ``start``: a screen's p99 is a point estimate of 300 requests, and one that
        # misses by noise below ``start`` must not cost a replica the full run would not (galloping down from
        # ``start`` costs one more full run when the count below fails, as it usually does)
        found = smallest_passing(start, floor, MAX_REPLICAS, lambda r: self.verify(r).miss is None, cut=most)
        return found if found is not None and found <= most else None

    def overloaded(self, replicas: int) -> Verdict:
        """A replica count too few for the peak, simulated all the same (a short run): the figures a pinned
        count reports (its queue grows for as long as the run lasts)."""
        return self._run(replicas, self.options[-1], SCREEN_REQUESTS, force=True)

    def below(self, replicas: int) -> Verdict | None:
        """What one replica fewer came to: its full run if there was one, else its screening run."""
        return self.verdicts.get(replicas - 1) or self.screens.get(replicas - 1)


def smallest_passing(guess: int, low: int, high: int, ok: Callable[[int], bool],
                     cut: int | None = None) -> int | None:
    """The smallest ``r`` in [low, high] with ``ok(r)`` for a predicate false below some point and true from it:
    gallop from ``guess`` (down while it holds, up while it does not), then bisect. ``cut``: None as soon as
    the answer is known to be above it (a failing count at or above it); the probes are the same either way."""
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
        if cut is not None and failing >= cut:
            return None  # the answer is above this failing count, so above the cut
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


def miss_phrase(point: float, bound: float, target: float, digits: str = ",.0f") -> str:
    """``X ms (95% bound B), which misses T ms``, or ``X ms, whose 95% bound B misses T ms`` when only the
    bound does: true either way."""
    if point > target:
        return f"{point:{digits}} ms (95% bound {bound:{digits}}), which misses {target:{digits}} ms"
    return f"{point:{digits}} ms, whose 95% bound {bound:{digits}} misses {target:{digits}} ms"


def fixed_traffic(demand: Demand) -> Traffic:
    """The traffic a demand without a declared one means: fixed lengths at the means; a closed loop of the
    sequences, or Poisson arrivals at the rate."""
    lengths = Lengths(mean=demand.input_tokens), Lengths(mean=demand.output_tokens)
    context = demand.max_prompt_tokens + demand.output_tokens
    if demand.requests_per_s is None:
        return Traffic(arrivals="closed", users=math.ceil(demand.amount), input=lengths[0], output=lengths[1],
                       max_context_tokens=context)
    return Traffic(arrivals="poisson", rate_per_s=demand.requests_per_s, input=lengths[0], output=lengths[1],
                   max_context_tokens=context)


def open_for_many(speed: Speed, demand: Demand, traffic: Traffic) -> Traffic:
    """A closed loop of more than ``MAX_CLOSED_USERS`` users, simulated as Poisson arrivals at the most they can
    send while the SLA holds (each cycle its TTFT and output at the TPOT target plus the think time): that many
    users are the open stream's infinite-source limit, the rate errs high, and simulating each user is too dear."""
    if traffic.arrivals != "closed" or traffic.users <= MAX_CLOSED_USERS:
        return traffic
    tpot = demand.tpot_ms if demand.tpot_ms is not None else speed.tpot(1)
    cycle_s = (demand.ttft_ms + (demand.output_tokens - 1) * tpot) / 1000.0 + traffic.think_time_s
    return replace(traffic, arrivals="poisson", rate_per_s=traffic.users / cycle_s, users=0, think_time_s=0.0)


def replicas_lower_bound(speed: Speed, demand: Demand, traffic: Traffic, seqs: int) -> int:
    """Replicas no layout of this speed can do with fewer: the stream's rate over 1.25 x a replica's steady
    throughput at ``seqs`` in flight (with a TPOT target, the most whose steady TPOT meets it: more in flight
    on average would break it); for a closed loop, the users' rate if every request took the most the SLA
    allows (its TTFT and output tokens at the TPOT target) plus the think time."""
    capacity = UNSTABLE_FACTOR * speed.rate(seqs, batched_tokens(demand, seqs))
    if traffic.arrivals != "closed":
        return max(1, math.ceil(traffic.rate_per_s / capacity - 1e-9))
    tpot = demand.tpot_ms if demand.tpot_ms is not None else speed.tpot(seqs)
    cycle_s = (demand.ttft_ms + (demand.output_tokens - 1) * tpot) / 1000.0 + traffic.think_time_s
    return max(1, math.ceil(traffic.users / cycle_s / capacity - 1e-9))
