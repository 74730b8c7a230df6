"""A layout's figures at peak under the declared traffic, simulated (simulation.py) with the plan's step times.

- ``Traffic``: the SLA's traffic as the planner holds it (spec/traffic.py: the declared process, else the peak
  key's), hashable so every verdict is memoised.
- ``step_time_for``: the performance model's step time for a layout (with a measured profile's correction),
  as the simulator calls it, its parts memoised once for every simulation of that layout. A step carrying a
  prompt pays vLLM's per-prompt dispatch once (performance.prefill_ms counts it once per prompt).
- ``simulated``: one (layout, max_num_seqs, max_num_batched_tokens, replicas) simulated with
  ``SIMULATED_REQUESTS`` measured requests, seeded from the traffic itself (``seed_of``; never Python's
  ``hash()``), so the same input gives the same plan: a model renamed keeps its plan, and models of one traffic
  share their simulations.

A layout meets the SLA when the upper bound of the p99's 95% interval (simulation.p99_bounds), not the point
estimate, is within the target, for TTFT and for the per-request TPOT: another run with other seeds then
lands within the SLA too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Protocol

from ....spec.models import LlmSlaSpec
from ....spec.traffic import LengthSpec
from ...types import LengthsPlan, TrafficPlan
from .load import Speed
from .performance import step_timer
from .simulation import Overloaded, SimulationResult, simulate
from .steptime import StepTimer
from .workload import Lengths, Workload, lognormal_cv_for_p99

# Measured requests per simulation: the p99's interval then spans the 0.99 n -/+ 1.96 sqrt(0.0099 n) order
# statistics, about p98.5 to p99.5 at 1,500 (plus a tenth as many warm-up requests, not measured): the
# 1,493rd of 1,500 sorted TTFTs is what the SLA is held to.
SIMULATED_REQUESTS = 1500
SCREEN_REQUESTS = SIMULATED_REQUESTS // 5  # short runs that steer the search (verify.py)
SIMULATION_SOURCE = "simulation of vLLM's V1 scheduler (each p99 held to the SLA at its 95% upper bound)"


@dataclass(kw_only=True, frozen=True)
class Traffic:
    """The peak load's shape: arrivals, the whole stream's rate or users, and the lengths."""

    arrivals: str  # poisson | bursty | closed
    rate_per_s: float = 0.0
    users: int = 0
    think_time_s: float = 0.0
    cv: float = 1.0
    input: Lengths = Lengths(mean=1.0)
    output: Lengths = Lengths(mean=1.0)
    max_context_tokens: int = 2**31 - 1
    trace: tuple[tuple[int, int], ...] = ()
    trace_gaps_s: tuple[float, ...] = ()
    trace_path: str | None = None

    def workload(self, replicas: int, ttft_ms: float | None, tpot_ms: float | None) -> Workload:
        return Workload(arrivals=self.arrivals, rate_per_s=self.rate_per_s, users=self.users,
                        think_time_s=self.think_time_s, cv=self.cv, input=self.input, output=self.output,
                        max_context_tokens=self.max_context_tokens, trace=self.trace, trace_gaps_s=self.trace_gaps_s,
                        replicas=replicas, ttft_target_ms=ttft_ms, tpot_target_ms=tpot_ms)


def seed_of(traffic: Traffic) -> int:
    """A simulation seed from the traffic's description (every field but the trace file's path, whose rows it
    holds): stable across runs and machines, and independent of the model's name, so two models declaring the
    same traffic draw the same requests (and share every simulation of the same layout), and a rename changes
    nothing. Floats enter at 9 significant digits: a derived one (a lognormal's cv from its p99) may differ in
    its last bit between two platforms' maths libraries, which must not draw other requests."""
    return int.from_bytes(hashlib.sha256(traffic_text(traffic).encode()).digest()[:8], "big")


def traffic_text(value: object) -> str:
    """What ``seed_of`` digests: a Traffic (less its trace file's path) and what it holds, as text, every float
    at 9 significant digits."""
    if isinstance(value, Traffic):
        value = replace(value, trace_path=None)
    if isinstance(value, float):
        return format(value, ".9g")
    if isinstance(value, tuple):
        return "(" + ",".join(traffic_text(v) for v in value) + ")"
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is not None:
        return type(value).__name__ + "(" + ",".join(f"{f}={traffic_text(getattr(value, f))}" for f in fields) + ")"
    return repr(value)


def step_time_for(speed: Speed) -> StepTimer:
    """The layout's step time as the simulator calls it (module docstring), one per Speed: the performance
    model's own sum (performance.step_timer, its parts memoised, not interpolated) with the correction."""
    step = speed.__dict__.get("_step")
    if step is None:
        gpu, shape, correction = speed.gpu, speed.shape, speed.correction
        step = speed.__dict__["_step"] = step_timer(
            gpu, shape, speed.layout, dispatch_ms=gpu.prefill_dispatch_ms_per_layer * shape.layers,
            prefill=correction.prefill, tpot=correction.tpot)
    return step


_MISSING = object()
# A result as plain values, for what crosses a process or a file (plan/prewarm.py, simcache.py): the compiled
# SimulationResult neither unpickles (its frozen __setattr__ refuses pickle's) nor serialises itself.
RESULT_FIELDS = tuple(SimulationResult.__dataclass_fields__)


def result_values(result: SimulationResult) -> dict[str, float | int]:
    """``result``'s fields by name; ``SimulationResult(**values)`` is the result again."""
    return {f: getattr(result, f) for f in RESULT_FIELDS}


def simulated(speed: Speed, traffic: Traffic, max_num_seqs: int, max_num_batched_tokens: int, kv_tokens: int,
              replicas: int, ttft_ms: float, tpot_ms: float | None, seed: int,
              requests: int = SIMULATED_REQUESTS) -> SimulationResult | None:
    """One simulation of ``replicas`` replicas of a layout under ``traffic``. The targets only judge the
    result (``meets``): the run itself is memoised without them, so plans of one model that differ only in
    their SLA (the cheaper alternatives' relaxations, explore's sweep) share their simulations."""
    key = simulation_key(speed, traffic, max_num_seqs, max_num_batched_tokens, kv_tokens, replicas, seed, requests)
    found = SIMULATIONS.get(key, _MISSING)
    if found is not _MISSING:
        return found  # type: ignore[return-value]
    try:
        result: SimulationResult | None = simulate(
            step_ms=step_time_for(speed), workload=traffic.workload(replicas, None, None),
            max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, kv_cache_tokens=kv_tokens,
            requests=requests, seed=seed)
    except Overloaded:
        result = None  # the replicas cannot keep up: judged as the closed form's unstable counts are
    SIMULATIONS.put(key, result)
    return result


SimulationKey = tuple  # simulation_key's: every input of one simulation, by value


def simulation_key(speed: Speed, traffic: Traffic, max_num_seqs: int, max_num_batched_tokens: int, kv_tokens: int,
                   replicas: int, seed: int, requests: int) -> SimulationKey:
    """Everything one simulation depends on, by value (picklable: prewarm.py hands them between processes).
    The step time is step_time_for's inputs: the GPU's constants, the shape, the layout and the correction's
    two ratios (not the Speed itself, nor its request shape, which the traffic carries)."""
    correction = speed.correction
    return (speed.gpu, speed.shape, speed.layout, correction.prefill, correction.tpot, traffic, max_num_seqs,
            max_num_batched_tokens, kv_tokens, replicas, seed, requests)


class SimulationStore(Protocol):
    """Where simulations outlive the process (modelfleet/simcache.py, the edge's; none in the compiler)."""

    def get(self, key: SimulationKey, default: object = None) -> object: ...

    def put(self, key: SimulationKey, result: SimulationResult | None) -> None: ...


class SimulationMemo:
    """Simulations run in this process, by simulation_key: a result is a pure function of its key, so a memo
    hit is the run itself. Bounded: past ``limit`` entries the oldest half is dropped. ``recorded``, when a
    list, collects every entry this process adds: what a forked worker hands back to its parent
    (plan/prewarm.py). ``store``, when an edge sets one, backs the memo (read on a miss, written on a run)."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self.entries: dict[SimulationKey, SimulationResult | None] = {}
        self.recorded: list[tuple[SimulationKey, SimulationResult | None]] | None = None
        self.store: SimulationStore | None = None

    def get(self, key: SimulationKey, default: object = None) -> object:
        found = self.entries.get(key, _MISSING)
        if found is _MISSING and self.store is not None:
            found = self.store.get(key, _MISSING)
            if found is not _MISSING:
                self._keep(key, found)  # type: ignore[arg-type]
        return default if found is _MISSING else found

    def put(self, key: SimulationKey, result: SimulationResult | None) -> None:
        self._keep(key, result)
        if self.store is not None:
            self.store.put(key, result)

    def _keep(self, key: SimulationKey, result: SimulationResult | None) -> None:
        entries = self.entries
        if len(entries) >= self.limit:
            for old in list(entries)[: self.limit // 2]:
                del entries[old]
        entries[key] = result
        if self.recorded is not None:
            self.recorded.append((key, result))

    def update(self, found: list[tuple[SimulationKey, SimulationResult | None]]) -> None:
        """Entries another process ran (and stored, when it had the store): kept here, not stored again."""
        for key, result in found:
            if key not in self.entries:
                self._keep(key, result)

    def __len__(self) -> int:
        return len(self.entries)

    def cache_clear(self) -> None:  # as functools' caches are cleared (bench/scale.py starts each run cold)
        self.entries.clear()


SIMULATIONS = SimulationMemo()


def meets(result: SimulationResult, ttft_ms: float, tpot_ms: float | None, share: float = 1.0) -> str | None:
    """None when both p99s' upper bounds are within the targets, else the stage that misses (ttft, tpot).
    ``share`` 0 judges the point estimates instead (a short screening run), and between 0 and 1 in between."""
    ttft = result.ttft_p99_ms + share * (result.ttft_p99_high_ms - result.ttft_p99_ms)
    tpot = result.tpot_p99_ms + share * (result.tpot_p99_high_ms - result.tpot_p99_ms)
    if ttft > ttft_ms:
        return "ttft"
    if tpot_ms is not None and tpot > tpot_ms:
        return "tpot"
    return None


def traffic_of(sla: LlmSlaSpec) -> Traffic:
    """The SLA's traffic at peak (spec/traffic.py): the declared arrivals and lengths, else the peak key's
    process with fixed lengths at the means."""
    declared = sla.traffic
    kind = sla.arrivals()
    context = sla.max_context_tokens
    inp = _lengths(declared.input if declared else None, sla.input_tokens(), context - sla.output_tokens())
    out = _lengths(declared.output if declared else None, sla.output_tokens(), context - 1)
    rate = sla.peak_requests_per_s if sla.peak_requests_per_s is not None else (
        (sla.peak_output_tokens_per_s or 0.0) / sla.output_tokens())
    trace = declared.trace if declared else None
    common = dict(input=inp, output=out, max_context_tokens=context, trace=trace.rows if trace else (),
                  trace_gaps_s=trace.gaps_s if trace else (), trace_path=trace.path if trace else None)
    if kind == "closed":
        return Traffic(arrivals="closed", users=sla.peak_concurrent_sequences or 1,
                       think_time_s=(declared.think_time_s or 0.0) if declared else 0.0, **common)
    return Traffic(arrivals=kind, rate_per_s=float(rate), cv=(declared.cv or 1.0) if declared else 1.0, **common)


def _lengths(spec: LengthSpec | None, mean: int, maximum: int) -> Lengths:
    if spec is None:
        return Lengths(mean=float(mean), maximum=maximum)
    if spec.histogram is not None:
        return Lengths(distribution="histogram", histogram=spec.histogram, maximum=maximum,
                       mean=spec.mean_tokens(mean))
    cv = spec.cv if spec.cv is not None else (lognormal_cv_for_p99(mean, spec.p99) if spec.p99 is not None else 0.0)
    return Lengths(distribution=spec.distribution, mean=float(spec.mean or mean), cv=cv or 0.0, maximum=maximum)


def traffic_plan(traffic: Traffic, replicas: int) -> TrafficPlan:
    """The simulated traffic as the plan states it: per replica, and the lengths' mean, p99 and cap."""
    def lengths(spec: Lengths) -> LengthsPlan:
        if traffic.trace_path is not None:
            return LengthsPlan(trace=traffic.trace_path)
        return LengthsPlan(distribution=spec.distribution, mean=round(spec.expected(), 1),
                           p99=round(spec.quantile(0.99), 1), max=spec.maximum)
    if traffic.arrivals == "closed":
        share = dict(users_per_replica=round(traffic.users / replicas, 2), think_time_s=traffic.think_time_s)
    else:
        share = dict(requests_per_s_per_replica=round(traffic.rate_per_s / replicas, 4),
                     cv=traffic.cv if traffic.arrivals == "bursty" else None)
    return TrafficPlan(arrivals=traffic.arrivals, input=lengths(traffic.input), output=lengths(traffic.output), **share)
