"""Fitting one layout to an LLM's demand: max_num_seqs, max_num_batched_tokens, replicas, figures at peak.

1. a layout is missed when one prompt alone exceeds the p99 TTFT, or one stream alone the p99 TPOT: no number
   of replicas rescues it;
2. the closed form (speed/load.py's docstring) guesses: ``max_num_seqs``, the most sequences whose steady TPOT
   stays within the p99 (or the KV cache, or the stack's cap); the load one replica may carry within the p99
   TTFT; replicas, the peak over that, at least the availability floor;
3. the simulation decides (verify.py): the fewest replicas, and their max_num_seqs, whose simulated p99 TTFT
   and p99 TPOT meet the SLA under the declared traffic; the constraint that failed one replica fewer binds.
   A pinned replica count is simulated as it is, and a miss says so with the count that would meet the SLA.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from .speed.load import Demand, Fit, Miss, Speed, batched_tokens, largest, p99_wait_ms, smallest
from .speed.performance import Step, step_ms
from .speed.peak import meets
from .speed.simulation import MIN_QUEUE_LIMIT
from .verify import MAX_REPLICAS, Verdict, Verifier, fixed_traffic, miss_phrase, replicas_lower_bound


@dataclass(kw_only=True, frozen=True)
class Guess:
    """The closed form's answer for one layout: the simulation's first guess, and a bound on the replicas."""

    seqs: int
    seq_limit: str
    chunk: int
    capacity: float
    ttft_binds: bool
    replicas: int
    binding: str
    needed: int
    closed_form_ttft_ms: float
    options: tuple[int, ...]  # max_num_seqs to simulate, in order of preference
    least: int  # replicas no fewer than which can serve (verify.replicas_lower_bound)


@functools.lru_cache(maxsize=4096)
def first_guess(speed: Speed, demand: Demand, kv_seqs: int) -> Guess | Miss:
    """The closed form (speed/load.py) for a layout: a Miss no replica count rescues, else its guess."""
    miss = _alone(speed, demand)
    if miss is not None:
        return miss
    seqs, seq_limit = _max_num_seqs(speed, demand, kv_seqs)
    chunk = batched_tokens(demand, seqs)
    alone = speed.service(1, chunk)  # chunked, a prompt takes a step per chunk
    if alone > demand.ttft_ms:
        return Miss("ttft", alone, f"one {demand.input_tokens:,}-token prompt in {math.ceil(demand.input_tokens / chunk)} "
                    f"chunk(s) of {chunk:,} tokens takes {alone:,.0f} ms, more than the p99 TTFT of "
                    f"{demand.ttft_ms:,.0f} ms")
    longest = _p99_prompt_miss(speed, demand, chunk)
    if longest is not None:
        return longest
    capacity, ttft_binds = _capacity(speed, demand, seqs, chunk)
    guess, binding, needed = _replicas(demand, capacity, ttft_binds, seq_limit)
    batch, rate, _ = _at_peak(speed, demand, seqs, chunk, guess)
    top = max(1, min(kv_seqs, demand.seqs_cap))
    options = (seqs,) if demand.pinned_seqs is not None or seqs >= top else (seqs, top)
    # With a TPOT target, more than `seqs` running at once (on average) would break it: the throughput bound
    least = max(demand.floor, replicas_lower_bound(speed, demand, demand.traffic or fixed_traffic(demand),
                                                   seqs if demand.tpot_ms is not None else top))
    return Guess(seqs=seqs, seq_limit=seq_limit, chunk=chunk, capacity=capacity, ttft_binds=ttft_binds, replicas=guess,
                 binding=binding, needed=needed, closed_form_ttft_ms=_ttft(speed, demand, batch, chunk, rate),
                 options=options, least=least)


@functools.lru_cache(maxsize=4096)
def fit_layout(speed: Speed, demand: Demand, kv_seqs: int, kv_tokens: int | None = None,
               most: int | None = None) -> Fit | Miss | None:
    """The cheapest way one layout serves ``demand`` (``kv_seqs``: sequences of the average context its KV
    cache holds, ``kv_tokens`` its tokens), chosen on the simulation (verify.py) from the closed form's guess;
    None when more than ``most`` replicas would be needed (the layout cannot beat one already verified)."""
    guess = first_guess(speed, demand, kv_seqs)
    if isinstance(guess, Miss):
        return guess
    verifier = verifier_for(speed, demand, guess.options, kv_tokens or kv_seqs * (demand.input_tokens + demand.output_tokens))
    runs_before = verifier.runs
    ceiling = min(MAX_REPLICAS, most if most is not None else MAX_REPLICAS)
    if demand.pinned_replicas is None and guess.least > ceiling:
        return None
    chosen = _choose(verifier, demand, guess.replicas, ceiling, guess.binding)
    if chosen is None:
        return None if most is not None else _never(verifier, ceiling)
    verdict, binding, shortfall = chosen
    seqs, chunk, result = verdict.max_num_seqs, verdict.max_num_batched_tokens, verdict.result
    if result is None:  # a pinned count whose queue outgrew even a short run (simulation.Overloaded)
        return Miss("ttft", 0.0, f"{verdict.replicas} replica(s) cannot keep up with the peak: the simulated queue "
                    f"grew past {MIN_QUEUE_LIMIT:,} requests; {shortfall or 'more replicas are needed'}")
    batch, rate, short = _at_peak(speed, demand, seqs, chunk, verdict.replicas)
    below = verifier.below(verdict.replicas)
    limits = {"seq_limit": guess.seq_limit if seqs == guess.options[0] else "simulation", "capacity": guess.capacity,
              "needed": guess.needed, "kv_seqs": kv_seqs, "below": below}
    # The figures as the plan keeps them (0.1 ms, TPOT 0.01 ms, 0.1 token/s), so every text quoting them agrees.
    return Fit(max_num_seqs=seqs, max_num_batched_tokens=chunk, replicas=verdict.replicas, sequences_per_replica=batch,
               prefill_ms=round(speed.prefill_ms, 1), ttft_p99_ms=round(result.ttft_p99_ms, 1),
               tpot_ms=round(speed.tpot(batch), 2), tpot_at_max_ms=round(speed.tpot(seqs), 2),
               output_tokens_per_s_per_replica=round(rate * demand.output_tokens, 1), binding=binding, limits=limits,
               shortfall=shortfall or short, simulation=result, closed_form_ttft_p99_ms=round(guess.closed_form_ttft_ms, 1),
               simulations=verifier.runs - runs_before)


@functools.lru_cache(maxsize=1024)
def verifier_for(speed: Speed, demand: Demand, options: tuple[int, ...], kv_tokens: int) -> Verifier:
    """One Verifier per layout speed and demand: instance types of one GPU share its simulations."""
    return Verifier(speed, demand, options, kv_tokens)


def _p99_prompt_miss(speed: Speed, demand: Demand, chunk: int) -> Miss | None:
    """Declared random prompt lengths whose 99th percentile alone, on an idle replica, already takes longer than
    the p99 TTFT: every request's TTFT is at least its own prompt's prefill, so the p99 TTFT is at least the
    p99-length prompt's (dispatch counted once; the simulator counts it per chunk), whatever the replicas."""
    traffic = demand.traffic
    if traffic is None or traffic.trace or traffic.input.distribution == "fixed":
        return None
    tokens = min(round(traffic.input.quantile(0.99)), demand.max_prompt_tokens)
    total, done = speed.gpu.prefill_dispatch_ms_per_layer * speed.shape.layers, 0
    while done < tokens:
        size = min(chunk, tokens - done)
        done += size
        total += step_ms(speed.gpu, speed.shape, speed.layout, Step(size, done, 0, 0))
    alone = total * speed.correction.prefill
    if alone <= demand.ttft_ms:
        return None
    return Miss("ttft", alone, f"a p99-length prompt ({tokens:,} tokens of the declared {traffic.input.distribution} "
                f"lengths) takes {alone:,.0f} ms to its first token on an idle replica, more than the p99 TTFT of "
                f"{demand.ttft_ms:,.0f} ms: at least 1% of requests miss it whatever the replicas")


def _alone(speed: Speed, demand: Demand) -> Miss | None:
    """A layout no replica count rescues: one prompt or one stream alone is already too slow."""
    if speed.prefill_ms > demand.ttft_ms:
        return Miss("ttft", speed.prefill_ms, f"one {demand.input_tokens:,}-token prompt on an idle replica takes "
                    f"{speed.prefill_ms:,.0f} ms to its first token, more than the p99 TTFT of {demand.ttft_ms:,.0f} ms")
    one = speed.tpot(1)
    if demand.tpot_ms is not None and one > demand.tpot_ms:
        return Miss("tpot", one, f"one stream alone decodes at {one:,.1f} ms per token, more than the p99 TPOT "
                    f"of {demand.tpot_ms:g} ms")
    return None


def _choose(verifier: Verifier, demand: Demand, guess: int, ceiling: int,
            closed_binding: str) -> tuple[Verdict, str, str | None] | None:
    """The verdict at the replicas the plan runs, what bound them, and a pinned count's miss in words."""
    if demand.pinned_replicas is not None:
        verdict = verifier.screen(demand.pinned_replicas)
        if verdict.miss is None:
            verdict = verifier.verify(demand.pinned_replicas)
        if verdict.miss is None:
            return verdict, demand.pinned_by, None
        enough = verifier.least_replicas(max(guess, demand.pinned_replicas + 1), demand.pinned_replicas + 1, MAX_REPLICAS)
        if verdict.result is None:  # failed unsimulated (too few for the peak): a short run all the same
            forced = verifier.overloaded(demand.pinned_replicas)
            if forced.result is not None and verifier.traffic.arrivals == "closed":
                verdict = forced  # a closed loop's queue is bounded by its users: the run's figures are its own
            else:  # an open stream's queue grows as long as the run lasts: it misses, and no p99 figure holds
                return forced if forced.result is not None else verdict, demand.pinned_by, miss_text(verdict, demand,
                                                                                                    enough)
        return verdict, demand.pinned_by, miss_text(verdict, demand, enough)
    least = verifier.least_replicas(guess, demand.floor, ceiling)
    if least is None:
        return None
    below = (verifier.below(least) or verifier.screen(least - 1)) if least > 1 else None
    if least == demand.floor and (below is None or below.miss is None):
        binding = "availability"
    else:
        binding = below.miss if below is not None else closed_binding
    return verifier.verify(least), binding, None


def miss_text(verdict: Verdict, demand: Demand, enough: int | None) -> str:
    """What a pinned replica count misses, with the figures and the count that would meet the SLA."""
    result = verdict.result
    fix = f"{enough} replica(s) would meet it" if enough else f"no count up to {MAX_REPLICAS} meets it"
    if result is None:
        return (f"misses: {verdict.replicas} replica(s) cannot keep up with the peak (the queue grows without "
                f"bound); {fix}")
    runs = f"{verdict.replicas} replica(s), {result.simulated_requests:,} simulated requests"
    stage = meets(result, demand.ttft_ms, demand.tpot_ms)  # what misses at the 95% bounds, against these targets
    if stage is None:  # failed unsimulated: fewer replicas than the peak's steady throughput needs
        return (f"misses: {verdict.replicas} replica(s) are fewer than the peak's steady throughput needs (a run of "
                f"{result.simulated_requests:,} simulated requests stayed within the SLA only while its queue built "
                f"up); {fix}")
    if stage == "ttft":
        return (f"misses: with {runs}, p99 TTFT "
                f"{miss_phrase(result.ttft_p99_ms, result.ttft_p99_high_ms, demand.ttft_ms)}; {fix}")
    return (f"misses: with {runs}, p99 TPOT "
            f"{miss_phrase(result.tpot_p99_ms, result.tpot_p99_high_ms, demand.tpot_ms, ',.1f')}; {fix}")


def _never(verifier: Verifier, ceiling: int) -> Miss:
    verdict = verifier.screen(ceiling)
    result = verdict.result
    figure = 0.0 if result is None else (result.ttft_p99_ms if verdict.miss == "ttft" else result.tpot_p99_ms)
    return Miss(verdict.miss or "ttft", figure, f"even {ceiling} replicas miss the SLA in simulation "
                f"({miss_text(verdict, verifier.demand, None)})")


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
