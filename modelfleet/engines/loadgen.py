"""Load for a local Triton model over HTTP, from one asyncio thread: open loop (a fixed schedule) or closed loop.

Why asyncio and not a thread pool: on a small machine the load generator shares the CPUs with the server.
A pool of Python threads (256 were tried) spends its time contending for the GIL and the cores, so it sends
late and reads late, and then measures its own backlog as server latency. One event loop with keep-alive
connections costs a fraction of that, and can be pinned to one core (``bench/overload.py`` does).

Open loop: request ``i`` is *due* at ``i / rate`` seconds; it is sent then, whether or not earlier ones
were answered, and its latency is counted from the due time, not from when it was actually sent. A client
that falls behind therefore cannot hide queueing (no coordinated omission); how far behind it fell is
reported separately (``sent_s - due_s``).

Requests are KServe v2 JSON with outputs asked for in binary (``binary_data_output``); an answer counts as
received when its whole body has been read. Needs ``aiohttp`` (installed with ``tritonclient[http]``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..plan.types import TritonModelPlan

OK, TIMEOUT, QUEUE_FULL = "ok", "timeout", "queue-full"
# No answer within the client's timeout: the request is given up (the server may still hold it).
NO_ANSWER = "no-answer"
# Numeric wire types a request can be filled with; strings go as JSON text (BYTES).
NUMERIC_DATATYPES = {"TYPE_FP32": "FP32", "TYPE_FP64": "FP64", "TYPE_FP16": "FP16", "TYPE_INT64": "INT64",
            "TYPE_INT32": "INT32", "TYPE_INT16": "INT16", "TYPE_INT8": "INT8", "TYPE_UINT8": "UINT8",
            "TYPE_BOOL": "BOOL"}
VARIABLE_DIM = 4  # length used for a -1 dimension


@dataclass(frozen=True)
class Sample:
    """One request, in seconds from the start of the run."""

    due_s: float  # when the schedule said to send it (closed loop: when it was sent)
    sent_s: float  # when it was handed to the connection
    done_s: float  # when its answer (or error) had been read completely
    outcome: str  # OK, TIMEOUT, QUEUE_FULL, NO_ANSWER, or "error: <status> <text>"

    @property
    def latency_s(self) -> float:
        return self.done_s - self.due_s


def infer_body(model: TritonModelPlan, key: int) -> bytes:
    """A valid KServe v2 JSON request for ``model`` whose content depends only on ``key`` (batch of one).

    Equal keys give equal bodies, so the response cache can serve repeats; distinct keys never collide.
    """
    inputs = []
    for tensor in model.inputs:
        shape = [VARIABLE_DIM if d == -1 else d for d in tensor.dims]
        shape = [1, *shape] if model.max_batch_size > 0 else shape
        count = 1
        for dim in shape:
            count *= dim
        if tensor.data_type == "TYPE_STRING":
            data: list[Any] = [f"request {key}"] * count
        elif tensor.data_type == "TYPE_BOOL":
            data = [bool(key % 2)] * count
        else:
            data = [key % 127] * count  # fits every integer type; exact in floating point
        datatype = "BYTES" if tensor.data_type == "TYPE_STRING" else NUMERIC_DATATYPES[tensor.data_type]
        inputs.append({"name": tensor.name, "shape": shape, "datatype": datatype, "data": data})
    return json.dumps({"inputs": inputs, "parameters": {"binary_data_output": True}}).encode()


def classify(status: int, text: str) -> str:
    """The outcome of one answer: the two refusals of an overloaded Triton queue by their messages."""
    if status == 200:
        return OK
    if "Request timeout expired" in text:
        return TIMEOUT
    if "Exceeds maximum queue size" in text:
        return QUEUE_FULL
    return f"error: {status} {text[:120]}"


async def _send(session: Any, url: str, body: bytes, due: float, start: float) -> Sample:
    loop = asyncio.get_running_loop()
    sent = loop.time()
    try:
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
            payload = await response.read()
            outcome = classify(response.status, "" if response.status == 200 else payload.decode(errors="replace"))
    except TimeoutError:  # asyncio's and aiohttp's timeouts are TimeoutError from Python 3.11
        outcome = NO_ANSWER
    except Exception as error:  # connection refused/reset: a failed request, not a crash
        outcome = f"error: {type(error).__name__} {error}"
    return Sample(due - start, sent - start, loop.time() - start, outcome)


def _session(timeout_s: float) -> Any:
    import aiohttp

    # limit=0: no client-side cap on connections, so queueing happens in the server, where it is measured.
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                 timeout=aiohttp.ClientTimeout(total=timeout_s))


async def _open_loop(url: str, bodies: Sequence[bytes], rate_rps: float, timeout_s: float) -> list[Sample]:
    loop = asyncio.get_running_loop()
    async with _session(timeout_s) as session:
        start = loop.time()
        tasks = []
        for index, body in enumerate(bodies):
            due = start + index / rate_rps
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(_send(session, url, body, due, start)))
        return list(await asyncio.gather(*tasks))


def open_loop(http_url: str, model_name: str, bodies: Sequence[bytes], rate_rps: float,
              timeout_s: float = 300.0) -> list[Sample]:
    """Send ``bodies[i]`` at ``i / rate_rps`` s to ``model_name``; one Sample per request, in order."""
    url = f"{http_url}/v2/models/{model_name}/infer"
    return asyncio.run(_open_loop(url, bodies, rate_rps, timeout_s))


async def _closed_loop(url: str, body_of: Callable[[int], bytes], concurrency: int, duration_s: float,
                       timeout_s: float, pause_s: float = 0.0) -> list[Sample]:
    loop = asyncio.get_running_loop()
    samples: list[Sample] = []
    counter = iter(range(1 << 62))
    async with _session(timeout_s) as session:
        start = loop.time()

        async def worker() -> None:
            while loop.time() - start < duration_s:
                now = loop.time()
                samples.append(await _send(session, url, body_of(next(counter)), now, start))
                if pause_s:
                    await asyncio.sleep(pause_s)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples


def closed_loop(http_url: str, model_name: str, body_of: Callable[[int], bytes], concurrency: int,
                duration_s: float, timeout_s: float = 60.0, pause_s: float = 0.0) -> list[Sample]:
    """``concurrency`` clients, each sending its next request when the last is answered (and ``pause_s`` has
    passed), for ``duration_s``."""
    url = f"{http_url}/v2/models/{model_name}/infer"
    return asyncio.run(_closed_loop(url, body_of, concurrency, duration_s, timeout_s, pause_s))


@dataclass(frozen=True)
class Summary:
    """One run of a schedule, as the benchmark reports it (times in ms unless named otherwise)."""

    requests: int
    answered: int
    within_sla: int
    rejected_timeout: int
    rejected_queue_full: int
    errors: int
    p50_ms: float | None  # of answered requests, from their scheduled send time
    p99_ms: float | None
    schedule_s: float  # requests / offered rate: the time the load was offered for
    achieved_rps: float  # requests / (last send - first send)
    lag_p99_ms: float  # how late the client sent, 99th percentile (its own backlog)
    goodput_rps: float  # answers within the SLA per second of the schedule


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation, as numpy's default."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarise(samples: Sequence[Sample], sla_s: float, rate_rps: float) -> Summary:
    """The figures of one open-loop run at ``rate_rps`` against an SLA of ``sla_s``."""
    answered = [s.latency_s for s in samples if s.outcome == OK]
    sends = [s.sent_s for s in samples]
    within = sum(latency <= sla_s for latency in answered)
    schedule_s = len(samples) / rate_rps
    span = max(sends) - min(sends)

    def ms(values: Sequence[float], q: float) -> float | None:
        return round(percentile(values, q) * 1000, 1) if values else None

    return Summary(
        requests=len(samples), answered=len(answered), within_sla=within,
        rejected_timeout=sum(s.outcome == TIMEOUT for s in samples),
        rejected_queue_full=sum(s.outcome == QUEUE_FULL for s in samples),
        errors=sum(s.outcome.startswith("error") or s.outcome == NO_ANSWER for s in samples),
        p50_ms=ms(answered, 50), p99_ms=ms(answered, 99), schedule_s=round(schedule_s, 3),
        achieved_rps=round((len(samples) - 1) / span, 1) if span > 0 else 0.0,
        lag_p99_ms=ms([s.sent_s - s.due_s for s in samples], 99) or 0.0,
        goodput_rps=round(within / schedule_s, 1))
