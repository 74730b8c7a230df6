"""Overload benchmark: the compiled Triton config against a naive one, on the REAL tritonserver, in one run.

Why: the compiler claims its queue policy (REJECT after a timeout derived from the SLA, a bounded queue) and
the response cache keep answers inside the SLA under overload, where Triton's defaults (never time out,
unbounded queue, no cache) serve everything late. This measures it instead of asserting it.

Set-up: one local tritonserver (as ``modelfleet serve`` runs it) holding the model twice: as compiled
(only instance_group is KIND_CPU) and as ``<model>-naive`` (the same config without default_queue_policy
and without the response cache). Both run the synthetic stand-in, whose time is the plan's:
max(compute_ms, n / rps_per_instance) per batch of n, so "what one instance sustains" is the plan's
rps_per_instance on this CPU too. Each gets the same open-loop load: REQUESTS sent at OVERLOAD x that rate,
a fraction of them repeating an earlier input. Latency is measured from each request's scheduled send time
(so a busy client cannot hide queueing). Goodput = answers within the SLA's p99 latency, per second of the
whole run (first send to last answer).

Usage: python bench/overload.py [--stack dev] [--model image-preprocessor] [--overload 3] [--requests 1500]
Writes bench/results/overload-<stack>-<model>.{md,json} (and .png when matplotlib is importable).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modelfleet.commands.serve import available_backends  # noqa: E402
from modelfleet.engines.tritonserver import (  # noqa: E402
    LocalTritonServer, find_tritonserver, http_ok, metric_value, prepare_backends, scrape_metrics)
from modelfleet.plan import TritonModelPlan  # noqa: E402
from modelfleet.project import Project  # noqa: E402
from modelfleet.render_triton import parse_config, render_config  # noqa: E402
from modelfleet.serve import plan_local_repository, write_local_repository  # noqa: E402


# label -> (model name suffix, what changes from the compiled config)
VARIANTS = {"compiled": ("", "as compiled"),
            "naive": ("-naive", "Triton's defaults: no queue policy (never times out, unbounded queue), no cache"),
            "timeout only": ("-timeout-only", "diagnostic: compiled, but max_queue_size 0 (unbounded)")}


def variant(model, label: str):
    """``model`` (a LocalModel) changed as VARIANTS[label] says, under its own name."""
    suffix, _ = VARIANTS[label]
    config = parse_config(model.config_text)
    config.name = model.name + suffix
    if label == "naive":
        config.dynamic_batching.ClearField("default_queue_policy")
        config.ClearField("response_cache")
    elif label == "timeout only":
        config.dynamic_batching.default_queue_policy.max_queue_size = 0
    return dataclasses.replace(model, name=config.name, config_text=render_config(config),
                               response_cache=config.response_cache.enable)


def repository(plan, model_name: str, workdir: Path, install) -> tuple[Path, tuple[str, ...]]:
    """Every VARIANTS copy of ``model_name`` as synthetic stand-ins; (repository, server args)."""
    empty = workdir / "no-artifacts"
    empty.mkdir(parents=True, exist_ok=True)  # no artifacts: both copies run the plan-timed stand-in
    local = plan_local_repository(plan, empty, available_backends(install), (plan.model(model_name).server,))
    compiled = next(m for m in local.models if m.name == model_name)
    local = dataclasses.replace(local, models=tuple(variant(compiled, label) for label in VARIANTS))
    backends = prepare_backends(install, workdir)
    return write_local_repository(local, workdir / "repository", backends), local.server_args


def request_input(model: TritonModelPlan, index: int) -> list:
    """A valid request whose content is unique to ``index`` (so only deliberate repeats hit the cache)."""
    inputs = []
    for tensor in model.inputs:
        dims = [1] + [4 if d == -1 else d for d in tensor.dims] if model.max_batch_size > 0 else list(tensor.dims)
        wire = {"TYPE_STRING": "BYTES", "TYPE_FP32": "FP32", "TYPE_INT64": "INT64"}[tensor.data_type]
        if wire == "BYTES":
            value = np.full(dims, f"request {index}".encode(), dtype=np.object_)
        else:
            value = np.full(dims, index, dtype=np.float32 if wire == "FP32" else np.int64)
        infer_input = httpclient.InferInput(tensor.name, dims, wire)
        infer_input.set_data_from_numpy(value)
        inputs.append(infer_input)
    return inputs


def outcome_of(error: InferenceServerException) -> str:
    text = str(error)
    if "Request timeout expired" in text:
        return "timeout"
    return "queue-full" if "Exceeds maximum queue size" in text else f"error: {text[:80]}"


def drive(url: str, model: TritonModelPlan, name: str, rate: float, requests: int, repeat: float,
          threads: int) -> list[tuple[float, float, str]]:
    """Open-loop load; per request (scheduled send offset s, latency s from that moment, outcome)."""
    local, clients, lock = threading.local(), [], threading.Lock()
    rng = np.random.default_rng(0)
    keys = [int(rng.integers(0, i)) if i and rng.random() < repeat else i for i in range(requests)]

    def one(index: int, due: float, start: float) -> tuple[float, float, str]:
        if not hasattr(local, "client"):
            local.client = httpclient.InferenceServerClient(url, connection_timeout=120, network_timeout=120)
            with lock:
                clients.append(local.client)
        try:
            local.client.infer(name, request_input(model, keys[index]))
            kind = "ok"
        except InferenceServerException as error:
            kind = outcome_of(error)
        return due - start, time.perf_counter() - due, kind

    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        futures = []
        for index in range(requests):
            due = start + index / rate
            time.sleep(max(0.0, due - time.perf_counter()))
            futures.append(pool.submit(one, index, due, start))
        results = [f.result() for f in futures]
    for client in clients:
        client.close()
    return results


def summarise(results: list[tuple[float, float, str]], sla_s: float, metrics: dict[str, float]) -> dict:
    ok = np.array([latency for _, latency, kind in results if kind == "ok"])
    duration = max(sent + latency for sent, latency, _ in results)
    kinds = [kind for _, _, kind in results]
    within = int((ok <= sla_s).sum()) if ok.size else 0
    return {"requests": len(results), "answered": int(ok.size), "within_sla": within,
            "timeout_rejected": kinds.count("timeout"), "queue_full_rejected": kinds.count("queue-full"),
            "other_errors": sum(k.startswith("error") for k in kinds),
            "p50_ms": round(float(np.percentile(ok, 50)) * 1000, 1) if ok.size else None,
            "p99_ms": round(float(np.percentile(ok, 99)) * 1000, 1) if ok.size else None,
            "goodput_rps": round(within / duration, 1), "duration_s": round(duration, 2), **metrics}


def server_metrics(before: dict, after: dict, name: str) -> dict[str, float]:
    """What Triton itself counted for ``name`` during one run."""
    def change(metric: str, **labels: str) -> float:
        try:
            after_value = metric_value(after, metric, model=name, **labels)
            return after_value - metric_value(before, metric, model=name, **labels)
        except KeyError:
            return 0.0
    executed = change("nv_inference_request_success") - change("nv_cache_num_hits_per_model")
    executions = change("nv_inference_exec_count")
    return {"metric_rejected": change("nv_inference_request_failure", reason="REJECTED"),
            "cache_hits": change("nv_cache_num_hits_per_model"), "executions": executions,
            # Triton adds a batch's compute time to each of its requests: the mean is per batch execution
            "ms_per_execution": round(change("nv_inference_compute_infer_duration_us") / executed / 1000, 1)
            if executed else None}


def run(args: argparse.Namespace) -> dict:
    plan = Project(str(ROOT)).plan(args.stack)
    model = plan.model(args.model)
    rate = args.overload * model.rps_per_instance * model.instance_count
    install = find_tritonserver()
    with tempfile.TemporaryDirectory(prefix="bench-overload-") as tmp:
        repo, server_args = repository(plan, args.model, Path(tmp), install)
        with LocalTritonServer(repo, server_args, workdir=Path(tmp), install=install, stop_timeout=40) as server:
            while not http_ok(server.metrics_url):
                time.sleep(0.05)
            url = server.http_url.removeprefix("http://")
            runs = {}
            for label, (suffix, _) in VARIANTS.items():
                name = args.model + suffix
                before = scrape_metrics(server.metrics_url)
                results = drive(url, model, name, rate, args.requests, args.repeat_fraction, args.threads)
                runs[label] = summarise(results, model.p99_latency_ms / 1000,
                                        server_metrics(before, scrape_metrics(server.metrics_url), name))
                runs[label]["samples"] = results
                time.sleep(1.0)
    settings = {"stack": args.stack, "model": args.model, "rate_rps": round(rate, 1), "overload": args.overload,
                "requests": args.requests, "repeat_fraction": args.repeat_fraction, "threads": args.threads,
                "sla_p99_ms": model.p99_latency_ms, "queue_timeout_us": model.queue_timeout_us,
                "max_queue_size": model.max_queue_size, "max_batch_size": model.max_batch_size,
                "window_us": model.max_queue_delay_us, "compute_ms": model.compute_ms,
                "rps_per_instance": model.rps_per_instance, "machine": f"{platform.machine()}, {_cpus()} CPUs"}
    return {"settings": settings, "runs": runs}


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "n/a"
    return f"{a / b:.2f}x" if b else ("n/a (both 0)" if not a else "n/a (naive 0)")


ROWS = (("answered", "answered"), ("answered within SLA", "within_sla"), ("goodput (within SLA / s)", "goodput_rps"),
        ("p50 latency of answers (ms)", "p50_ms"), ("p99 latency of answers (ms)", "p99_ms"),
        ("rejected: queue timeout (503)", "timeout_rejected"), ("rejected: queue full (503)", "queue_full_rejected"),
        ("nv_inference_request_failure{REJECTED}", "metric_rejected"), ("cache hits", "cache_hits"),
        ("other errors", "other_errors"), ("run duration (s)", "duration_s"), ("batch executions", "executions"),
        ("measured ms per batch execution", "ms_per_execution"))
RATIOS = ("within_sla", "goodput_rps", "p50_ms", "p99_ms")


def markdown(report: dict) -> str:
    s, runs = report["settings"], report["runs"]
    lines = [f"# Overload: compiled vs naive Triton config ({s['model']}, stack {s['stack']})", "",
             f"{s['requests']} requests per config at {s['rate_rps']} req/s = {s['overload']}x the plan's "
             f"{s['rps_per_instance']} req/s per instance, {s['repeat_fraction']:.0%} repeated inputs, open loop "
             f"({s['threads']} client threads), latency from the scheduled send time; SLA p99 {s['sla_p99_ms']} ms. "
             f"Compiled: window {s['window_us']} us, queue timeout {s['queue_timeout_us']} us (REJECT), max_queue_size "
             f"{s['max_queue_size']}, max batch {s['max_batch_size']}, response cache. Synthetic stand-in timed by the "
             f"plan: max({s['compute_ms']} ms, n / {s['rps_per_instance']} req/s) per batch of n. Real tritonserver "
             f"2.51 (CPU) on {s['machine']}.", ""]
    lines += [f"- {label}: {description}" for label, (_, description) in VARIANTS.items()]
    lines += ["", "| | " + " | ".join(runs) + " | compiled / naive |", "|---|" + "---:|" * (len(runs) + 1)]
    for title, key in ROWS:
        cells = " | ".join(str(run[key]) for run in runs.values())
        compared = ratio(runs["compiled"][key], runs["naive"][key]) if key in RATIOS else ""
        lines.append(f"| {title} | {cells} | {compared} |")
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> bool:
    """Latency of each answered request over its send time, both configs, with the SLA line."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for label, colour in (("compiled", "tab:green"), ("naive", "tab:red"), ("timeout only", "tab:blue")):
        points = [(sent, latency * 1000) for sent, latency, kind in report["runs"][label]["samples"] if kind == "ok"]
        if points:
            axis.scatter(*zip(*points), s=6, color=colour, label=f"{label}: answered")
    axis.axhline(report["settings"]["sla_p99_ms"], color="black", linestyle="--", label="SLA p99")
    axis.set(yscale="log", xlabel="scheduled send time (s)", ylabel="latency (ms)",
             title=f"{report['settings']['model']}: {report['settings']['overload']}x overload")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--model", default="image-preprocessor")
    parser.add_argument("--overload", type=float, default=3.0, help="x the plan's rps_per_instance")
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--repeat-fraction", type=float, default=0.2, help="share of requests repeating an input")
    parser.add_argument("--threads", type=int, default=256)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    report = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"overload-{args.stack}-{args.model}-r{int(args.repeat_fraction * 100)}"
    text = markdown(report)
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    drawn = plot(report, stem.with_suffix(".png"))
    print(text + f"\nwrote {stem}.md, .json{', .png' if drawn else ' (no matplotlib: no plot)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
