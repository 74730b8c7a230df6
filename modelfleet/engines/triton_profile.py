"""A Triton model's speed per batch size, measured on a running tritonserver with the project's load generator.

For each batch size (powers of two up to the compiled ``max_batch_size``, and it), one client sends requests
of that many items one at a time (:func:`modelfleet.engines.loadgen.closed_loop`, concurrency 1) for a fixed
time, after a short warm-up that is not counted. With nothing queued behind it, a request's latency is one
execution plus its round trip; ``throughput_rps`` is the items answered per second of request time, what one
instance serves busy back to back (a lower bound: the round trip is counted as if it were execution). That is
what the compiler needs: a full batch's time (the queue derivation's ``compute_ms``) and an instance's
throughput (its replicas).

The client pauses :data:`PAUSE_S` between requests, outside the measured time: sent the instant the previous
answer arrived, a request hit a stall of the local tritonserver 2.51's dynamic batcher (measured here: about 1
request in 300 waited 500 ms in the server's queue, Triton's statistics showing it as queue time, not
compute; with a 2 ms pause, none in 1,150). The stall is the batcher's idle wait, not the model's speed.

Two things would falsify the figures, so the local run (``modelfleet profile`` without ``--url``) removes them
and says so: the batching window (a lone partial batch waits it out; the local repository sets it to 0) and
the response cache (repeats would be answered from memory; the local repository turns it off). Against a
URL they are whatever the endpoint has: the bodies are made unique (no cache hits), and a window shows in
the figures below the full batch (the caller says so).

Request bodies depend only on the model's tensors and a key (unique per request): digits of the key in the
dtype's exact range, zeros after; strings carry the key as text. Pure but for :func:`measure_batch`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..plan.types import TritonModelPlan
from .loadgen import NUMERIC_DATATYPES, OK, VARIABLE_DIM, Sample, closed_loop, percentile

# Largest value each wire type holds exactly (floats: integers below 2^mantissa bits).
_EXACT_MAX = {"FP32": 2**24, "FP64": 2**53, "FP16": 2**11, "INT64": 2**62, "INT32": 2**31 - 1, "INT16": 2**15 - 1,
              "INT8": 127, "UINT8": 255, "BOOL": 2}
DEFAULT_SECONDS = 3.0  # per batch size: hundreds of requests for a model of a few ms, a p99 worth reading
WARMUP_SECONDS = 0.5  # first requests pay for lazy initialisation (arenas, kernels): not the model's speed
MIN_ANSWERED = 20  # fewer answers give no p99 worth writing down
MAX_SECONDS = 60.0  # per batch size, when a slow model needs longer for MIN_ANSWERED
PAUSE_S = 0.002  # between requests, outside the measured time (see the module docstring)


@dataclass(frozen=True)
class BatchMeasurement:
    """One batch size's run: requests sent, answered, and the figures of the answered ones."""

    batch_size: int
    requests: int
    answered: int
    seconds: float  # from the first send to the last answer
    throughput_rps: float  # items answered per second of request time (pauses left out)
    p50_ms: float | None
    p99_ms: float | None
    first_error: str | None  # the first failed request's outcome, to say why


def batch_sizes(max_batch_size: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to ``max_batch_size`` and it; (1,) for a model without batching (a request is one item)."""
    sizes, size = [], 1
    while size < max_batch_size:
        sizes.append(size)
        size *= 2
    return tuple(sizes + [max(max_batch_size, 1)])


def _values(datatype: str, count: int, key: int) -> list[Any]:
    """``count`` elements: the digits of ``key`` in base (the dtype's exact range), least significant first."""
    base = _EXACT_MAX[datatype]
    out = []
    for _ in range(count):
        out.append(key % base)
        key //= base
    return [bool(v) for v in out] if datatype == "BOOL" else out


def batch_body(model: TritonModelPlan, batch: int, key: int) -> bytes:
    """A KServe v2 JSON request of ``batch`` items for ``model``, unique for each ``key`` (no cache hits)."""
    inputs = []
    for tensor in model.inputs:
        dims = [VARIABLE_DIM if d == -1 else d for d in tensor.dims]
        shape = [batch, *dims] if model.max_batch_size > 0 else dims
        per_item = 1
        for dim in dims:
            per_item *= dim
        rows = batch if model.max_batch_size > 0 else 1
        if tensor.data_type == "TYPE_STRING":
            data: list[Any] = [f"request {key} item {r}" for r in range(rows) for _ in range(per_item)]
            datatype = "BYTES"
        else:
            datatype = NUMERIC_DATATYPES[tensor.data_type]
            data = [v for r in range(rows) for v in _values(datatype, per_item, key * batch + r)]
        inputs.append({"name": tensor.name, "shape": shape, "datatype": datatype, "data": data})
    return json.dumps({"inputs": inputs, "parameters": {"binary_data_output": True}}).encode()


def summarise_batch(batch: int, samples: Sequence[Sample], seconds: float) -> BatchMeasurement:
    """The figures of one batch size's run of ``seconds`` (pure)."""
    answered = [s for s in samples if s.outcome == OK]
    failed = next((s.outcome for s in samples if s.outcome != OK), None)
    if not samples:
        return BatchMeasurement(batch, 0, 0, seconds, 0.0, None, None, None)
    latencies = [s.latency_s for s in answered]

    def ms(q: float) -> float | None:
        return round(percentile(latencies, q) * 1000, 3) if latencies else None

    busy = sum(latencies)  # request time: the instance executing (and the round trips), pauses left out
    rate = batch * len(answered) / busy if busy > 0 else 0.0
    return BatchMeasurement(batch, len(samples), len(answered), round(seconds, 3), round(rate, 1), ms(50), ms(99),
                            failed)


def measure_batch(http_url: str, model: TritonModelPlan, batch: int, seconds: float = DEFAULT_SECONDS) -> BatchMeasurement:
    """Warm up, then send ``batch``-item requests one at a time for ``seconds``, longer (up to
    :data:`MAX_SECONDS`) until :data:`MIN_ANSWERED` are answered; keys never repeat."""
    key = int(time.time_ns() % 10**9) * 10**8  # unique across runs too (an endpoint's cache outlives a run)
    samples: list[Sample] = []
    spent, run = 0.0, seconds

    def body(k: int) -> bytes:
        return batch_body(model, batch, key + len(samples) + k)

    closed_loop(http_url, model.name, lambda k: batch_body(model, batch, key + 10**7 + k), 1, WARMUP_SECONDS,
                pause_s=PAUSE_S)
    while True:
        chunk = closed_loop(http_url, model.name, body, 1, run, pause_s=PAUSE_S)
        samples += chunk
        spent += run
        answered = sum(s.outcome == OK for s in samples)
        if answered >= MIN_ANSWERED or spent >= MAX_SECONDS or len(samples) > answered:
            return summarise_batch(batch, samples, spent)
        run = min(MAX_SECONDS - spent, spent * (MIN_ANSWERED + 1) / max(answered, 1) - spent)


def usable(measurement: BatchMeasurement) -> bool:
    """Enough answers, and no failures: a run with errors measured the errors."""
    return measurement.answered >= MIN_ANSWERED and measurement.answered == measurement.requests
