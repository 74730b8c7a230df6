"""Per-request timestamps from tritonserver's own trace file: how long each request really queued and ran.

Why: the metrics endpoint gives sums and counts (means), but the compiled queue timeout is a bound on
every request, and a p99 execution time is a tail; only per-request times can check either. Triton writes
them when started with :func:`trace_args` (``--trace-config``: every request, level TIMESTAMPS, written
to the file when the server stops). Times are Triton's steady clock in nanoseconds.

One request's entries are scattered over the file (a JSON array of ``{"id", "timestamps": [...]}`` and
``{"id", "model_name", ...}`` objects); :func:`read_trace` gathers them by id. A request that never ran
(rejected from the queue, or served from the cache) has no ``COMPUTE_START``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


def trace_args(path: Path) -> list[str]:
    """tritonserver flags that trace every request's timestamps to ``path`` (written when it stops)."""
    return [f"--trace-config=triton,file={path}", "--trace-config=triton,log-frequency=0",
            "--trace-config=rate=1", "--trace-config=count=-1", "--trace-config=level=TIMESTAMPS"]


@dataclass(frozen=True)
class RequestTrace:
    """What Triton recorded for one request (nanoseconds; None when the request never reached that step)."""

    model: str
    queue_start_ns: int | None
    compute_start_ns: int | None
    compute_end_ns: int | None
    http_recv_start_ns: int | None = None  # the HTTP endpoint started reading the request
    http_send_end_ns: int | None = None  # ...and finished sending the answer (or the error)

    @property
    def queue_us(self) -> float | None:
        """Time in the scheduler's queue (batching window included), for requests that were executed."""
        if self.queue_start_ns is None or self.compute_start_ns is None:
            return None
        return (self.compute_start_ns - self.queue_start_ns) / 1000

    @property
    def server_us(self) -> float | None:
        """The whole request as the HTTP endpoint saw it, from reading it to having sent its answer."""
        if self.http_recv_start_ns is None or self.http_send_end_ns is None:
            return None
        return (self.http_send_end_ns - self.http_recv_start_ns) / 1000

    @property
    def compute_us(self) -> float | None:
        """The execution of the batch this request was part of (inputs in, model, outputs out)."""
        if self.compute_start_ns is None or self.compute_end_ns is None:
            return None
        return (self.compute_end_ns - self.compute_start_ns) / 1000


def parse_trace(entries: list[dict]) -> list[RequestTrace]:
    """Gather a trace file's entries by request id (in id order)."""
    models: dict[int, str] = {}
    stamps: dict[int, dict[str, int]] = {}
    for entry in entries:
        request = int(entry["id"])
        if "model_name" in entry:
            models[request] = str(entry["model_name"])
        for stamp in entry.get("timestamps", ()):
            stamps.setdefault(request, {})[stamp["name"]] = int(stamp["ns"])
    return [RequestTrace(models.get(request, ""), times.get("QUEUE_START"), times.get("COMPUTE_START"),
                         times.get("COMPUTE_END"), times.get("HTTP_RECV_START"), times.get("HTTP_SEND_END"))
            for request, times in sorted(stamps.items())]


def read_trace(path: Path) -> list[RequestTrace]:
    """The requests of a trace file written by a stopped server."""
    return parse_trace(json.loads(Path(path).read_text()))
