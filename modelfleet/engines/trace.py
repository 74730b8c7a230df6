"""Per-request timestamps from tritonserver's own trace file: how long each request really queued and ran.

Why: the metrics endpoint gives sums and counts (means), but the compiled queue timeout is a bound on
every request, and a p99 execution time is a tail; only per-request times can check either. Triton writes
them when started with :func:`trace_args` (``--trace-config``: every request, level TIMESTAMPS, flushed
to numbered files as it goes, so that the trace survives a server that does not stop cleanly). Times are
Triton's steady clock in nanoseconds.

One request's entries are scattered over the file (a JSON array of ``{"id", "timestamps": [...]}`` and
``{"id", "model_name", ...}`` objects); :func:`read_trace` gathers them by id. A request that never ran
(rejected from the queue, or served from the cache) has no ``COMPUTE_START``.

Tracing crashes tritonserver 2.51 (the ``nvidia-pytriton`` 0.7.0 wheel) under load unless
:func:`trace_safe_environment` is applied; :class:`~modelfleet.engines.tritonserver.LocalTritonServer`
applies it whenever its arguments enable tracing. The cause, found here (``bench/trace_crash.py``, whose
header gives the evidence): ``TraceManager::TraceRelease`` locks the trace's mutex, drops the last
reference to the trace (freeing the mutex with it), then unlocks the freed mutex (in the wheel's binary:
``pthread_mutex_lock`` at +0x31873d, the release at +0x3187f2, ``pthread_mutex_unlock`` at +0x3188f6, whose
return address is the frame below libc in the crash backtraces). Fixed upstream by
triton-inference-server/server PR #8144, merged in April 2025, long after 2.51 (24.10).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


# glibc keeps up to this many freed chunks per size class in the freeing thread's cache (tcache; default 7).
TRACE_SAFE_TUNABLE = "glibc.malloc.tcache_count=65535"


def trace_safe_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` with glibc's per-thread free cache raised to its maximum, which keeps tritonserver 2.51's
    use-after-free in ``TraceRelease`` harmless.

    Why it works: a trace (280 bytes) is allocated by an HTTP thread and freed by the backend thread that
    releases the request. glibc caches 7 freed chunks per size in the freeing thread by default, so that
    cache is soon full and the freed trace goes back to the allocating thread's arena, which may hand it out
    again before the releasing thread unlocks the mutex inside it. The unlock then writes into a live
    object (heap corruption: SIGABRT from malloc's checks, SIGSEGV in ``free``, servers that stop
    answering) or, reading a ``__kind`` with the lock-elision bit out of the reused memory, runs ``xend``
    outside a transaction (SIGSEGV at libc+0x85e06 here; "invalid opcode" on a host without TSX). With the
    cache at its maximum the freed trace stays with the releasing thread, which allocates nothing before
    the unlock, so the unlock only writes into its own free chunk, past the cache's link fields.

    Its limit: the cache holds 65,535 chunks per size, so the protection is only certain while a backend
    thread has freed at most that many more traces than it allocated chunks of their size. Measured here
    (``bench/trace_crash.py``): without it 4 of 6 servers died or hung within 15 s of traced load
    (up to 60,000 requests each), with it 0 of 6, and 0 of 6 untraced; over 45 s (100,000-240,000 requests
    each) 1 of 6 servers with it died (SIGABRT), 0 of 3 untraced. The overload bench traces about
    12,000 requests per server and the engine tests about 1,200. Clusters run the pinned image
    (``modelfleet/spec/engine_versions.py``: 26.09, Triton 2.73), released after the upstream fix, and do not
    need this.
    """
    current = env.get("GLIBC_TUNABLES", "")
    if "glibc.malloc.tcache_count=" in current:
        return env
    return {**env, "GLIBC_TUNABLES": f"{current}:{TRACE_SAFE_TUNABLE}" if current else TRACE_SAFE_TUNABLE}


def traces(args: list[str] | tuple[str, ...]) -> bool:
    """Do these tritonserver arguments enable tracing?"""
    return any(arg.startswith("--trace-config") for arg in args)


# Traces written to disk every this many requests, as ``<file>.0``, ``<file>.1``, ...: the trace then does not
# depend on a clean stop. With log-frequency 0, 2.51 writes the whole trace only while it shuts down, and a
# server that is killed, or gives up its shutdown after --exit-timeout-secs, leaves no trace at all.
TRACE_FLUSH_EVERY = 100


def trace_args(path: Path, flush_every: int = TRACE_FLUSH_EVERY) -> list[str]:
    """tritonserver flags that trace every request's timestamps to files named ``path.<n>``, flushed every
    ``flush_every`` requests and at exit (read them with :func:`read_trace`)."""
    return [f"--trace-config=triton,file={path}", f"--trace-config=triton,log-frequency={flush_every}",
            "--trace-config=rate=1", "--trace-config=count=-1", "--trace-config=level=TIMESTAMPS"]


def trace_files(path: Path) -> list[Path]:
    """The files a server traced to ``path`` (see :func:`trace_args`), in the order it wrote them: ``path``
    itself (log-frequency 0) or ``path.0``, ``path.1``, ..."""
    path = Path(path)
    numbered = [f for f in path.parent.glob(path.name + ".*") if f.suffix[1:].isdigit()]
    return ([path] if path.is_file() else []) + sorted(numbered, key=lambda f: int(f.suffix[1:]))


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
    """The requests a server traced to ``path`` (all its files; a request's entries may span two)."""
    files = trace_files(path)
    if not files:
        raise FileNotFoundError(f"no trace file {path} or {path}.<n>: the server traced no request")
    return parse_trace([entry for f in files for entry in json.loads(f.read_text())])
