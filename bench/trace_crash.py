"""Why tritonserver 2.51 died under the overload bench, and the proof that the work-around holds.

The finding (``modelfleet/engines/trace.py``, ``trace_safe_environment``): with tracing on,
``TraceManager::TraceRelease`` unlocks a mutex inside the trace it has just freed. Whether that does harm
depends on whether another thread got the freed memory back first, so it shows up as rare, varied deaths
under load: SIGSEGV at ``xend`` in glibc's lock elision, SIGABRT from malloc's consistency checks or a
``length_error``, SIGSEGV in ``free``, or a server whose crash handler deadlocks and which stops answering.

How it was found, on the bench's crash reports (the engine wrapper now prints them whole):

- the SIGSEGV backtraces run TRITONBACKEND_RequestRelease -> tritonserver -> libc; the tritonserver frame,
  mapped to the binary (its symbols are not stripped: ``nm -C``), is the return address of the
  ``pthread_mutex_unlock`` call in ``TraceManager::TraceRelease`` (+0x3188fb); the disassembly of that
  function shows the lock (+0x31873d), the release of the last reference to the trace, whose
  ``_M_dispose`` runs ``~Trace`` and ``operator delete(trace, 0x118)`` (+0x3187f2), then the unlock of the
  mutex at trace+0x10;
- the libc frame is libc+0x85e06 (base from the ``__restore_rt`` frame, libc+0x3c050): the ``xend`` of
  ``__lll_unlock_elision``, which ``pthread_mutex_unlock`` only reaches when the mutex's ``__kind`` has the
  elision bit (256), which no mutex here is created with: the memory was reused. A 10-line C program that
  unlocks a zeroed mutex with ``__kind = 256`` faults at the same libc+0x85e06 ("general protection fault",
  as RTM works on this host: ``xend`` outside a transaction is #GP; it is #UD, "invalid opcode", where RTM
  is absent, which is the kernel message the issue quotes);
- upstream fixed exactly this ("deleting a mutex inside the lock", triton-inference-server/server PR #8144).

This script makes the crash frequent and compares three conditions, the same load for each:

- ``traced``: tracing on, glibc's default free cache (``glibc.malloc.tcache_count=7``): the bug as shipped;
- ``traced+workaround``: tracing on, as LocalTritonServer runs it (``trace_safe_environment``);
- ``untraced``: no tracing (the control: is tracing the trigger?).

Load per server: the dev stack's fraud-scorer (small tensors, so requests are cheap and many) served by the
synthetic stand-in sleeping ``--standin-ms`` per batch, plus its naive copy; a closed loop of ``--clients``
keep-alive connections for ``--seconds``, each request traced (about 3,500 requests/s here). A server
counts as dead when it exits during the load or does not stop with exit code 0, and as hung when requests
time out (``--timeout-s``) while it still runs.

Usage: python bench/trace_crash.py [--servers 6] [--seconds 15] [--conditions traced traced+workaround untraced]
Writes bench/results/trace-crash-<seconds>s.{md,json} (the json keeps every death report whole).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overload import standin_server  # noqa: E402

from modelfleet.engines.loadgen import OK, closed_loop, infer_body  # noqa: E402
from modelfleet.engines.trace import trace_args  # noqa: E402
from modelfleet.engines.tritonserver import TritonInstall, find_tritonserver  # noqa: E402
from modelfleet.plan.types import FleetPlan  # noqa: E402
from modelfleet.project import Project  # noqa: E402

GLIBC_DEFAULT_TCACHE = "glibc.malloc.tcache_count=7"  # stated explicitly, LocalTritonServer keeps it
CONDITIONS = ("traced", "traced+workaround", "untraced")


def one_server(plan: FleetPlan, install: TritonInstall, condition: str, workdir: Path,
               args: argparse.Namespace) -> dict:
    """Start a server under ``condition``, load it, stop it; how it went."""
    model = plan.model(args.model)
    extra = tuple(trace_args(workdir / "trace.json")) if condition.startswith("traced") else ()
    env = {"GLIBC_TUNABLES": GLIBC_DEFAULT_TCACHE} if condition == "traced" else {}
    with env_set(env), standin_server(plan, model.name, workdir, install, args.standin_ms, extra) as server:
        started = time.monotonic()
        samples = closed_loop(server.http_url, model.name + "-naive", lambda i: infer_body(model, i), args.clients,
                              args.seconds, timeout_s=args.timeout_s)
        seconds = time.monotonic() - started
        died_under_load = not server.running()
    status = server.exit_status()
    answered = sum(s.outcome == OK for s in samples)
    timed_out = sum("Timeout" in s.outcome for s in samples)
    if died_under_load or status is None or status.code != 0:
        verdict = ("died under load: " if died_under_load else "did not stop cleanly: ") + server.death_report()
    else:
        verdict = "ok"
    return {"condition": condition, "answered": answered, "rps": round(answered / seconds), "timed_out": timed_out,
            "hung": timed_out > 0 and not died_under_load, "ok": verdict == "ok" and not timed_out,
            "verdict": verdict}


@contextmanager
def env_set(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the duration (the server inherits them); restore them after."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def markdown(results: list[dict], args: argparse.Namespace) -> str:
    lines = ["# tritonserver 2.51 under traced load: deaths per condition", "",
             f"{args.servers} server(s) per condition; each: {args.model} (stand-in, {args.standin_ms:g} ms per "
             f"batch) and its naive copy, {args.clients} clients in a closed loop for {args.seconds:g} s on the "
             f"naive copy, requests timing out after {args.timeout_s:g} s. Method: `bench/trace_crash.py`.", "",
             "| condition | servers | died or hung | answers/s (median) |", "|---|---:|---:|---:|"]
    for condition in args.conditions:
        rows = [r for r in results if r["condition"] == condition]
        rates = sorted(r["rps"] for r in rows)
        lines.append(f"| {condition} | {len(rows)} | {sum(not r['ok'] for r in rows)} | "
                     f"{rates[len(rates) // 2] if rates else '-'} |")
    lines += ["", "How each failed server ended (first line of its report):", ""]
    lines += [f"- {r['condition']}: {'hung, ' if r['hung'] else ''}{r['verdict'].splitlines()[0]}"
              + (f" ({r['timed_out']} requests timed out)" if r["timed_out"] else "")
              for r in results if not r["ok"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=6, help="servers per condition")
    parser.add_argument("--seconds", type=float, default=15.0, help="load per server")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--timeout-s", type=float, default=10.0, help="a request unanswered this long: hung")
    parser.add_argument("--model", default="fraud-scorer")
    parser.add_argument("--standin-ms", type=float, default=0.2)
    parser.add_argument("--conditions", nargs="+", choices=CONDITIONS, default=list(CONDITIONS))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    plan, install, results = Project(str(ROOT)).plan("dev"), find_tritonserver(), []
    for index in range(args.servers):  # conditions interleaved: the machine's other load hits all alike
        for condition in args.conditions:
            with tempfile.TemporaryDirectory(prefix="trace-crash-") as tmp:
                result = one_server(plan, install, condition, Path(tmp), args)
            results.append(result)
            print(f"server {index + 1}, {condition}: {result['rps']} answers/s, "
                  f"{result['verdict'].splitlines()[0]}", flush=True)
    text = markdown(results, args)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"trace-crash-{args.seconds:g}s"
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")  # the full death reports
    print(text + f"\nwrote {stem}.md, .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
