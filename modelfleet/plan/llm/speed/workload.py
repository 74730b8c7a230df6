"""What a simulated vLLM replica is sent: when requests arrive, and how long each one's prompt and answer are.

- Arrivals: ``poisson`` (independent users, exponential gaps), ``bursty`` (gamma gaps of a declared
  coefficient of variation: above 1 requests come in clumps), or ``closed`` (``users`` each sending the next
  request when the answer is complete plus ``think_time_s``).
- Lengths: ``fixed``, ``exponential`` or ``lognormal`` about a mean, or a weighted ``histogram``, each capped
  so prompt + answer fit the context; or a ``trace`` of (input, output) pairs replayed in order (cycled), its
  gaps, when it has timestamps, time-scaled to the declared rate.
- Replicas: the Service spreads requests over ``replicas`` pods at random. An open stream is thinned: each
  request goes to the simulated replica with probability 1/replicas, which for Poisson arrivals is again
  Poisson (at rate / replicas) and for bursty or traced arrivals is simulated as such a random split. A closed
  loop's users are not independent of the replicas' speed, so simulation.py simulates every replica.

Everything here is pure and seeded: the same seed draws the same requests.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from typing import Callable, Iterator, Literal

Arrivals = Literal["poisson", "closed", "bursty"]
Distribution = Literal["fixed", "exponential", "lognormal", "histogram"]
Z99 = 2.3263478740408408
MIN_RATE_PER_S = 1e-6  # an open stream's slowest simulated rate (one request in 11.6 days)  # the standard normal's 99th percentile


@dataclass(frozen=True, kw_only=True)
class Lengths:
    """Token lengths of prompts or answers: ``mean`` with ``cv`` (lognormal), or a ``histogram`` of
    (tokens, weight); every draw is at least 1 and at most ``maximum``."""

    distribution: Distribution = "fixed"
    mean: float = 0.0  # histogram: ignored (its own weighted mean)
    cv: float = 0.0  # lognormal only: standard deviation / mean (exponential is 1, fixed 0)
    maximum: int = 2**31 - 1
    histogram: tuple[tuple[int, float], ...] = ()

    def sampler(self, rng: random.Random) -> Callable[[], int]:
        """A function drawing one length (uses ``rng``)."""
        top = self.maximum
        if self.distribution == "fixed":
            value = max(1, min(top, round(self.mean)))
            return lambda: value
        if self.distribution == "exponential":
            rate = 1.0 / self.mean
            return lambda: max(1, min(top, round(rng.expovariate(rate))))
        if self.distribution == "lognormal":
            mu, sigma = lognormal_parameters(self.mean, self.cv)
            return lambda: max(1, min(top, round(rng.lognormvariate(mu, sigma))))
        tokens = [min(top, max(1, t)) for t, _ in self.histogram]
        cumulative = _cumulative([w for _, w in self.histogram])
        return lambda: tokens[bisect.bisect_right(cumulative, rng.random() * cumulative[-1])]

    def expected(self) -> float:
        """The mean length before the cap (a histogram's weighted mean of its capped lengths)."""
        if self.distribution != "histogram":
            return self.mean
        return sum(min(t, self.maximum) * w for t, w in self.histogram) / sum(w for _, w in self.histogram)

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the capped distribution (what the plan reports as p99 and the spec checks)."""
        if self.distribution == "fixed":
            value = self.mean
        elif self.distribution == "exponential":
            value = -self.mean * math.log(1.0 - q)
        elif self.distribution == "lognormal":
            mu, sigma = lognormal_parameters(self.mean, self.cv)
            value = math.exp(mu + sigma * _normal_quantile(q))
        else:
            ordered = sorted(self.histogram)
            cumulative = _cumulative([w for _, w in ordered])
            value = ordered[min(len(ordered) - 1, bisect.bisect_left(cumulative, q * cumulative[-1]))][0]
        return min(float(self.maximum), max(1.0, value))


def lognormal_parameters(mean: float, cv: float) -> tuple[float, float]:
    """(mu, sigma) of the lognormal with this mean and coefficient of variation."""
    sigma2 = math.log(1.0 + cv * cv)
    return math.log(mean) - sigma2 / 2.0, math.sqrt(sigma2)


def lognormal_cv_for_p99(mean: float, p99: float) -> float | None:
    """The cv of the lognormal with this mean whose p99 is ``p99``; None when none has (p99 <= mean, or
    p99 more than e^(Z99^2/2), about 15 times the mean)."""
    ratio = math.log(p99 / mean) if p99 > 0 and mean > 0 else -1.0
    disc = Z99 * Z99 - 2.0 * ratio
    if ratio <= 0 or disc < 0:
        return None
    sigma = Z99 - math.sqrt(disc)  # the smaller root: the larger one puts the mass below the mean
    return math.sqrt(math.exp(sigma * sigma) - 1.0)


def _normal_quantile(q: float) -> float:
    from statistics import NormalDist
    return NormalDist().inv_cdf(q)


def _cumulative(weights: list[float]) -> list[float]:
    total, out = 0.0, []
    for w in weights:
        total += w
        out.append(total)
    return out


@dataclass(frozen=True, kw_only=True)
class Workload:
    """The traffic one model's replicas receive (module docstring); ``rate_per_s`` and ``users`` are the whole
    stream's, spread over ``replicas`` at random."""

    arrivals: Arrivals = "poisson"
    rate_per_s: float = 0.0  # poisson, bursty
    users: int = 0  # closed
    think_time_s: float = 0.0  # closed: between an answer's last token and the user's next request
    cv: float = 1.0  # bursty: the gamma gaps' coefficient of variation (1 is Poisson)
    input: Lengths = Lengths(mean=1.0)
    output: Lengths = Lengths(mean=1.0)
    max_context_tokens: int = 2**31 - 1  # prompt + answer of any one request fit in it
    trace: tuple[tuple[int, int], ...] = ()  # (input, output) pairs replayed in order; replaces input/output
    trace_gaps_s: tuple[float, ...] = ()  # the trace's own gaps; replayed scaled to rate_per_s when given
    replicas: int = 1
    ttft_target_ms: float | None = None  # goodput counts requests within both targets
    tpot_target_ms: float | None = None


def request_lengths(workload: Workload, rng: random.Random) -> Callable[[], tuple[int, int]]:
    """Draws (prompt, answer) tokens: the trace's next pair, or an answer then a prompt capped to fit."""
    if workload.trace:
        state = {"next": 0}
        pairs = workload.trace

        def replay() -> tuple[int, int]:
            pair = pairs[state["next"] % len(pairs)]
            state["next"] += 1
            return pair
        return replay
    draw_in, draw_out = workload.input.sampler(rng), workload.output.sampler(rng)
    context = workload.max_context_tokens

    def draw() -> tuple[int, int]:
        out = min(draw_out(), context - 1)
        return max(1, min(draw_in(), context - out)), out
    return draw


def open_gaps_ms(workload: Workload, rng: random.Random) -> Iterator[float]:
    """Gaps between the requests one replica receives of an open stream (thinned: module docstring). A rate below
    ``MIN_RATE_PER_S`` is simulated at it: requests that far apart each find the replica idle, as they would at
    any lower rate, so the figures hold for it (and the clock stays finite)."""
    share = 1.0 / workload.replicas
    workload_rate = max(workload.rate_per_s, MIN_RATE_PER_S)
    if workload.trace_gaps_s:
        gaps = workload.trace_gaps_s
        scale = 1000.0 * len(gaps) / (sum(gaps) * workload_rate) if sum(gaps) > 0 else 0.0
        whole = (gaps[i % len(gaps)] * scale for i in _count())
    elif workload.arrivals == "bursty" and workload.cv != 1.0:
        shape = 1.0 / (workload.cv * workload.cv)
        scale = 1000.0 / workload_rate / shape
        if share >= 1.0:
            while True:
                yield rng.gammavariate(shape, scale)
        # The replica's gap spans K of the stream's gaps, K geometric with success 1/replicas, and a sum of K
        # gamma gaps of one scale is one gamma gap of K times the shape: one draw per request the replica
        # receives, not one per request the whole stream sends.
        log_miss = math.log1p(-share)
        while True:
            k = 1 + int(math.log(1.0 - rng.random()) / log_miss)
            yield rng.gammavariate(k * shape, scale)
    else:  # Poisson: thinning a Poisson stream gives a Poisson stream at the share of its rate, exactly
        rate = workload_rate * share / 1000.0
        while True:
            yield rng.expovariate(rate)
    if share >= 1.0:
        yield from whole
        return
    pending = 0.0
    for gap in whole:
        pending += gap
        if rng.random() < share:
            yield pending
            pending = 0.0


def _count() -> Iterator[int]:
    i = 0
    while True:
        yield i
        i += 1
