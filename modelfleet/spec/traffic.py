"""How an LLM's requests arrive at peak and how long they are: ``sla.traffic`` (optional).

    sla:
      peak_requests_per_s: 4
      avg_input_tokens: 2000
      avg_output_tokens: 300
      traffic:
        arrivals: poisson                                  # poisson | bursty (with cv) | closed (with think_time_s)
        input: {distribution: lognormal, p99: 7000}        # mean: avg_input_tokens
        output: {distribution: exponential}                # mean: avg_output_tokens

Without ``traffic`` (or without one of its keys) the peak key says how requests arrive:
``peak_requests_per_s`` and ``peak_output_tokens_per_s`` are an open stream, Poisson arrivals at that rate
(or at the token rate over the mean answer); ``peak_concurrent_sequences`` is a closed loop of that many users,
each sending the next request as soon as its answer is complete (think time 0). Lengths default to
``fixed`` at ``avg_input_tokens`` and ``avg_output_tokens`` (what plans assumed before traffic was declared).

A ``trace`` (JSON lines of ``input_tokens``, ``output_tokens`` and optionally ``timestamp`` in seconds) replaces
both lengths: its pairs are replayed in order, and its timestamps, when every line has one, are the arrivals,
time-scaled to the declared peak rate. The path is relative to models.yaml; the loader reads it, and its
content becomes part of the spec (what a pull request changes, what the plan is computed from).
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, Strict, ValidationError, ValidationInfo, WithJsonSchema, field_validator, model_validator

from .tensors import LIST, Frozen
from .values import MAX_CONTEXT_TOKENS, FieldProblem, quantity

TRACES_CONTEXT = "traffic_traces"  # validation context key: {path as written: the file's text, or why unreadable}
TRACE_PATH = r"^[A-Za-z0-9_.\-][A-Za-z0-9_.\-/]*$"
MAX_TRACE_LINES = 1_000_000
MAX_TRACE_BYTES = 4 * 1024 * 1024  # the loader reads at most this much of a file beside models.yaml
# A lognormal's p99 is at most e^(2.326^2 / 2), about 15 times its mean; beyond that no lognormal has it.
MAX_LOGNORMAL_P99_RATIO = 14.9


class LengthSpec(Frozen):
    """Prompt or answer lengths in tokens: a distribution about a mean, or a histogram."""

    distribution: Literal["fixed", "exponential", "lognormal"] = "fixed"
    # default: the SLA's avg_input_tokens / avg_output_tokens (which must agree when both are written)
    mean: quantity(0, MAX_CONTEXT_TOKENS, "mean tokens; default: avg_input_tokens or avg_output_tokens",
                   optional=True) = None
    p99: quantity(0, MAX_CONTEXT_TOKENS, "lognormal: the 99th percentile in tokens (above the mean)",
                  optional=True) = None
    cv: quantity(0, 10, "lognormal: standard deviation / mean, above 0 and at most 10", optional=True) = None
    histogram: Annotated[Optional[tuple[Annotated[tuple[int, float], Strict(False)], ...]], Field(
        description="[[tokens, weight], ...]: lengths drawn with these relative weights", **LIST)] = None

    @model_validator(mode="after")
    def _consistent(self) -> LengthSpec:
        if self.histogram is not None:
            if "distribution" in self.model_fields_set or any(v is not None for v in (self.mean, self.p99, self.cv)):
                raise FieldProblem(("histogram",), "a histogram is a distribution of its own", "remove distribution, "
                                   "mean, p99 and cv, or the histogram")
            if not self.histogram or any(t < 1 or w <= 0 or not math.isfinite(w) for t, w in self.histogram):
                raise FieldProblem(("histogram",), "a histogram needs at least one [tokens, weight] pair with tokens "
                                   ">= 1 and a positive weight", "e.g. [[500, 3], [2000, 1]]")
            return self
        if self.distribution != "lognormal" and (self.p99 is not None or self.cv is not None):
            field = "p99" if self.p99 is not None else "cv"
            raise FieldProblem((field,), f"{self.distribution} lengths have no {field} to choose (fixed: none, "
                               "exponential: cv 1, p99 4.6 x the mean)", f"remove {field}, or use distribution: lognormal")
        if self.distribution == "lognormal" and (self.p99 is None) == (self.cv is None):
            raise FieldProblem(("p99",), "lognormal lengths need their spread: exactly one of p99 or cv",
                               "add p99 (tokens, above the mean) or cv (e.g. 1.0)")
        return self

    def mean_tokens(self, default: float) -> float:
        if self.histogram is not None:
            return sum(t * w for t, w in self.histogram) / sum(w for _, w in self.histogram)
        return self.mean if self.mean is not None else default


class TraceRow(Frozen):
    input_tokens: int
    output_tokens: int
    timestamp: float | None = None


class TraceSpec(Frozen):
    """A trace file as the loader read it: its path and its rows (the rows are the spec's, not the disk's)."""

    path: str
    rows: tuple[tuple[int, int], ...]
    gaps_s: tuple[float, ...] = ()  # between consecutive timestamps; () when the trace has none


def trace_rows(path: str, text: str) -> TraceSpec:
    """Parse a JSON-lines trace; raises ValueError naming the line."""
    rows, stamps = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = TraceRow.model_validate(json.loads(line))
        except (ValueError, TypeError) as exc:
            errors = exc.errors() if isinstance(exc, ValidationError) else None
            first = (f"{'.'.join(map(str, errors[0]['loc'])) or 'the line'}: {errors[0]['msg'].lower()}" if errors
                     else f"not JSON ({exc})")
            raise ValueError(f"{path} line {number}: {first}; each line is a JSON object with input_tokens and "
                             "output_tokens (integers >= 1) and optionally timestamp (seconds)") from None
        if row.input_tokens < 1 or row.output_tokens < 1:
            raise ValueError(f"{path} line {number}: input_tokens and output_tokens must be at least 1")
        rows.append((row.input_tokens, row.output_tokens))
        stamps.append(row.timestamp)
        if len(rows) > MAX_TRACE_LINES:
            raise ValueError(f"{path} has more than {MAX_TRACE_LINES:,} requests")
    if not rows:
        raise ValueError(f"{path} is empty: no request lines")
    return TraceSpec(path=path, rows=tuple(rows), gaps_s=_gaps(path, stamps))


def _gaps(path: str, stamps: list[float | None]) -> tuple[float, ...]:
    given = [s is not None for s in stamps]
    if not any(given):
        return ()
    if not all(given):
        raise ValueError(f"{path} line {given.index(False) + 1}: has no timestamp while others do (all or none)")
    for i in range(1, len(stamps)):
        if stamps[i] < stamps[i - 1]:
            raise ValueError(f"{path} line {i + 1}: timestamp {stamps[i]} is earlier than the line before")
    if len(stamps) < 2 or stamps[-1] <= stamps[0]:
        raise ValueError(f"{path}: timestamps need at least two distinct times to give a rate")
    return tuple(b - a for a, b in zip(stamps, stamps[1:]))


class TrafficSpec(Frozen):
    """The shape of the peak load (module docstring)."""

    # default: poisson for peak_requests_per_s / peak_output_tokens_per_s, closed for peak_concurrent_sequences
    arrivals: Literal["poisson", "closed", "bursty"] | None = None
    think_time_s: quantity(0, 3600, "closed: seconds a user waits after an answer before the next request, 0 "
                           "to 3,600", low_inclusive=True, optional=True) = None
    cv: quantity(0, 100, "bursty: the coefficient of variation of the gaps between requests (gamma; 1 is "
                 "Poisson, above 1 clumps), above 0 and at most 100", optional=True) = None
    input: Optional[LengthSpec] = None  # default: fixed at avg_input_tokens
    output: Optional[LengthSpec] = None  # default: fixed at avg_output_tokens
    trace: Annotated[Optional[TraceSpec], WithJsonSchema({
        "type": "string", "pattern": TRACE_PATH, "description": "a JSON-lines file of input_tokens, output_tokens "
        "and optional timestamp, relative to models.yaml (replaces input and output)"})] = None

    @field_validator("trace", mode="before")
    @classmethod
    def _read(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value  # an already-read trace (an environment's patch re-validates the model)
        if ".." in value.split("/") or value.startswith("/") or not value:
            raise FieldProblem((), f"trace path {value!r} must be relative to models.yaml, inside its folder",
                               "commit the trace next to models.yaml and name it relative to it")
        read = (info.context or {}).get(TRACES_CONTEXT, {}).get(value)
        if read is None:
            raise FieldProblem((), f"{value} was not read", "load the catalogue with the loader "
                               "(modelfleet.load_fleet), which reads the trace files it names")
        if isinstance(read, TraceSpec):
            return read
        raise FieldProblem((), read, f"commit a JSON-lines trace at {value}, next to models.yaml")

    @model_validator(mode="after")
    def _consistent(self) -> TrafficSpec:
        kind = self.arrivals
        if self.cv is not None and kind != "bursty":
            raise FieldProblem(("cv",), f"cv describes bursty arrivals, not {kind or 'the default'}",
                               "add arrivals: bursty, or remove cv")
        if kind == "bursty" and self.cv is None:
            raise FieldProblem(("cv",), "bursty arrivals need their cv", "add cv (e.g. 2: gaps twice as variable "
                               "as Poisson)")
        if self.think_time_s is not None and kind != "closed":
            raise FieldProblem(("think_time_s",), "think_time_s belongs to a closed loop of users",
                               "add arrivals: closed, or remove think_time_s")
        if self.trace is not None and (self.input is not None or self.output is not None):
            raise FieldProblem(("trace",), "a trace gives both prompt and answer lengths",
                               "remove input and output, or the trace")
        return self


def read_traces(data: Any, read: Any) -> dict[str, Any]:
    """Every ``sla.traffic.trace`` the document names (environment patches included): path -> its TraceSpec,
    or why it could not be read or parsed."""
    found: dict[str, Any] = {}
    for sla in _slas(data):
        traffic = sla.get("traffic") if isinstance(sla, dict) else None
        path = traffic.get("trace") if isinstance(traffic, dict) else None
        if isinstance(path, str) and path not in found:
            found[path] = _read_trace(path, read)
    return found


def _slas(data: Any) -> list[Any]:
    models = data.get("models") if isinstance(data, dict) else None
    out = []
    for model in models if isinstance(models, list) else []:
        if isinstance(model, dict):
            out.append(model.get("sla"))
            envs = model.get("environments")
            out += [patch.get("sla") for patch in envs.values() if isinstance(patch, dict)] if isinstance(envs, dict) else []
    return out


def _read_trace(path: str, read: Any) -> Any:
    try:
        text = read(path)
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}"
    if len(text) > MAX_TRACE_BYTES:
        return f"{path} is larger than {MAX_TRACE_BYTES // 2**20} MiB: sample it down"
    try:
        return trace_rows(path, text)
    except ValueError as exc:
        return str(exc)


def traffic_mean(traffic: TrafficSpec | None, which: str) -> int | None:
    """The declared mean prompt (``which="input"``) or answer length, rounded; None when traffic leaves it to
    avg_input_tokens / avg_output_tokens."""
    if traffic is None:
        return None
    if traffic.trace is not None:
        column = 0 if which == "input" else 1
        return max(1, round(sum(row[column] for row in traffic.trace.rows) / len(traffic.trace.rows)))
    lengths = getattr(traffic, which)
    if lengths is None or (lengths.mean is None and lengths.histogram is None):
        return None
    return max(1, round(lengths.mean_tokens(0.0)))


def traffic_problem(sla: Any) -> None:
    """Raise the first contradiction between ``sla.traffic`` and the rest of the SLA (FieldProblem)."""
    traffic = sla.traffic
    closed_load = sla.peak_concurrent_sequences is not None
    if traffic.arrivals == "closed" and not closed_load:
        raise FieldProblem(("traffic", "arrivals"), "a closed loop needs its users: peak_concurrent_sequences",
                           "state the load as peak_concurrent_sequences, or use arrivals: poisson or bursty")
    if traffic.arrivals in ("poisson", "bursty") and closed_load:
        raise FieldProblem(("traffic", "arrivals"), f"{traffic.arrivals} arrivals need a rate: peak_requests_per_s "
                           "or peak_output_tokens_per_s", "state the rate, or use arrivals: closed (the "
                           "peak_concurrent_sequences users each wait for their answer)")
    if traffic.trace is not None:
        _trace_problem(sla, traffic.trace)
        return
    for which, declared in (("input", sla.avg_input_tokens), ("output", sla.avg_output_tokens)):
        lengths = getattr(traffic, which)
        if lengths is not None:
            room = sla.max_context_tokens - (sla.output_tokens() if which == "input" else 1)
            _length_problem(("traffic", which), lengths, declared, room, f"avg_{which}_tokens")


def _length_problem(path: tuple[str, ...], lengths: LengthSpec, declared: int | None, room: int, key: str) -> None:
    mean = lengths.mean_tokens(float(declared or 0))
    if declared is not None and (lengths.mean is not None or lengths.histogram is not None) and (
            abs(mean - declared) > max(1.0, 0.01 * declared)):
        raise FieldProblem(path + ("mean" if lengths.histogram is None else "histogram",),
                           f"the declared mean ({mean:,.0f} tokens) differs from {key} ({declared:,})",
                           f"write the mean once: remove {key}, or make them equal")
    if lengths.histogram is not None:
        longest = max(t for t, _ in lengths.histogram)
        if longest > room:
            raise FieldProblem(path + ("histogram",), f"{longest:,} tokens exceed the {room:,} the context leaves",
                               "lower it, or raise max_context_tokens")
        return
    if lengths.p99 is not None:
        if lengths.p99 <= mean:
            raise FieldProblem(path + ("p99",), f"p99 ({lengths.p99:,g}) is not above the mean ({mean:,.0f}): a "
                               "lognormal's 99th percentile is", "raise p99 above the mean, or use distribution: fixed")
        if lengths.p99 > MAX_LOGNORMAL_P99_RATIO * mean:
            raise FieldProblem(path + ("p99",), f"p99 ({lengths.p99:,g}) is more than {MAX_LOGNORMAL_P99_RATIO:g} "
                               f"times the mean ({mean:,.0f}): no lognormal has that tail", "use a histogram or a trace")
        if lengths.p99 > room:
            raise FieldProblem(path + ("p99",), f"p99 ({lengths.p99:,g}) exceeds the {room:,} tokens the context "
                               "leaves", "lower it, or raise max_context_tokens")


def _trace_problem(sla: Any, trace: TraceSpec) -> None:
    for number, (prompt, answer) in enumerate(trace.rows, 1):
        if prompt + answer > sla.max_context_tokens:
            raise FieldProblem(("traffic", "trace"), f"{trace.path} request {number}: {prompt:,} + {answer:,} tokens "
                               f"exceed max_context_tokens ({sla.max_context_tokens:,})",
                               "drop or cut the request, or raise max_context_tokens")
    for which, declared in (("input", sla.avg_input_tokens), ("output", sla.avg_output_tokens)):
        mean = sum(row[0 if which == "input" else 1] for row in trace.rows) / len(trace.rows)
        if declared is not None and abs(mean - declared) > max(1.0, 0.01 * declared):
            raise FieldProblem(("traffic", "trace"), f"the trace's mean {which} ({mean:,.0f} tokens) differs from "
                               f"avg_{which}_tokens ({declared:,})", f"remove avg_{which}_tokens (the trace gives it), "
                               "or make them equal")
    if trace.gaps_s and sla.peak_concurrent_sequences is not None:
        raise FieldProblem(("traffic", "trace"), f"{trace.path} has timestamps (an open stream) but the load is "
                           "peak_concurrent_sequences (a closed loop)", "state the load as peak_requests_per_s, or "
                           "drop the timestamps")
