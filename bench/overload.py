"""Overload benchmark: the compiled Triton config against a naive one, on the REAL tritonserver, in one run.

Why: the compiler claims that its queue policy (REJECT after a timeout derived from the SLA) and the
response cache keep answers inside the SLA under overload, where Triton's defaults (never time out, no
cache) serve everything late. This measures it. The method, step by step:

1. Stand-in. The model (default: the dev stack's image-preprocessor) is served by the synthetic stand-in
   with its exact tensors, which sleeps ``--standin-ms`` per batch and answers zeros. Everything else a
   batch costs here (making the outputs, the python backend copying them, 8 x 602 KB for the
   preprocessor) is real work on this machine: the stand-in's speed is measured, not assumed.
2. Calibrate. A closed loop (3 x max_batch_size clients sending back to back, to a naive copy so that
   nothing is rejected or cached) for ``--calibration-s``: capacity = answers per second one instance
   sustains here; a full batch's execution time from Triton's own per-request trace (p99).
3. Compile from the measurement, as a user would after profiling: the model's models.yaml entry with
   ``profile: {rps_per_instance: capacity, compute_ms: p99 execution, measured_on: <the GPU the stack
   plans it on>}``, compiled alone for the stack restricted to that GPU's family (so nothing is rescaled
   to another GPU). The queue timeout then follows from the SLA and this machine's figures (timeout,
   batching window inside it, + the batch in progress + its own = p99). If the measured execution leaves no queueing budget, the compiler refuses
   and says to lower ``overrides.max_batch_size``: the bench does that (halving), recalibrates, and
   reports every attempt.
4. Overload. One server holds the compiled model and a naive copy (no queue policy, no cache; batching as
   compiled). Each gets the same open-loop schedule: ``--requests`` at ``--overload`` x capacity,
   ``--repeat-fraction`` of them repeating an earlier input, sent by one asyncio thread pinned to its own
   CPU (the server keeps every CPU; the client cannot take the server's); each latency counts from the
   request's scheduled send time (no coordinated omission). Rounds alternate compiled and naive.

Reported per run: n, achieved send rate and the client's lag behind its schedule; answered, p50/p99 of the
answered requests' latency; answered within the SLA (share of n); goodput = answers within the SLA per
second of the schedule, also as a share of capacity; rejections (queue timeout / queue full), cache hits,
Triton's batch executions; compiled / naive ratios.

Usage: python bench/overload.py [--stack dev] [--model image-preprocessor] [--overload 3] [--requests 3000]
[--rounds 2] [--runs 1]. Writes bench/results/overload-<stack>-<model>.{md,json} (and .png when matplotlib is
importable); with ``--runs N`` also ``-runs.md``, one line per run. When the server dies, the bench says how
(signal, the kernel's lines, tritonserver's own crash report) and exits 1.
"""

from __future__ import annotations

import argparse
import shutil
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modelfleet.commands.serve import available_backends  # noqa: E402
from modelfleet.engines.loadgen import closed_loop, infer_body, open_loop, percentile, summarise  # noqa: E402
from modelfleet.engines.probes import metric_value, scrape_metrics  # noqa: E402
from modelfleet.engines.trace import read_trace, trace_args, trace_files  # noqa: E402
from modelfleet.engines.tritonserver import LocalTritonServer, TritonInstall, find_tritonserver, prepare_backends  # noqa: E402
from modelfleet.errors import ModelfleetError  # noqa: E402
from modelfleet.plan.types import FleetPlan, TritonModelPlan  # noqa: E402
from modelfleet.project import Project  # noqa: E402
from modelfleet.render.triton import parse_config, render_config  # noqa: E402
from modelfleet.serve import LocalModel, plan_local_repository, write_local_repository  # noqa: E402

NAIVE = "-naive"
VARIANTS = {"compiled": "as compiled from the measured profile (queue timeout, REJECT, bound, response cache)",
            "naive": "Triton's defaults: no queue policy (never times out, unbounded queue), no response cache"}
WARMUP_S = 1.0


@dataclasses.dataclass(frozen=True)
class Calibration:
    max_batch_size: int
    capacity_rps: float  # answers per second, closed loop, one instance
    answered: int
    seconds: float
    concurrency: int
    full_batch_p50_ms: float  # execution of a full batch, Triton's trace
    full_batch_p99_ms: float
    full_batches: int
    mean_batch: float


def with_batch(model: LocalModel, max_batch_size: int | None) -> LocalModel:
    """``model`` with another max_batch_size (calibrating a smaller batch), else unchanged."""
    if max_batch_size is None:
        return model
    config = parse_config(model.config_text)
    config.max_batch_size = max_batch_size
    return dataclasses.replace(model, config_text=render_config(config))


def naive_copy(model: LocalModel) -> LocalModel:
    """The same model without queue policy and cache, under ``<name>-naive``."""
    config = parse_config(model.config_text)
    config.name = model.name + NAIVE
    config.dynamic_batching.ClearField("default_queue_policy")
    config.ClearField("response_cache")
    return dataclasses.replace(model, name=config.name, config_text=render_config(config), response_cache=False)


@contextmanager
def standin_server(plan: FleetPlan, model_name: str, workdir: Path, install: TritonInstall, standin_ms: float,
                   extra_args: tuple[str, ...] = (), batch: int | None = None) -> Iterator[LocalTritonServer]:
    """One tritonserver with ``model_name`` as compiled in ``plan`` and its naive copy (with ``batch``, both
    at that max_batch_size), both the stand-in sleeping ``standin_ms`` per batch (whatever the plan
    assumes: the stand-in is what is measured)."""
    empty = workdir / "no-artifacts"
    empty.mkdir(parents=True, exist_ok=True)
    local = plan_local_repository(plan, empty, available_backends(install), (plan.model(model_name).server,))
    compiled = dataclasses.replace(with_batch(next(m for m in local.models if m.name == model_name), batch),
                                   compute_ms=standin_ms, rps_per_instance=0.0)
    local = dataclasses.replace(local, models=(compiled, naive_copy(compiled)))
    backends = prepare_backends(install, workdir)
    repository = write_local_repository(local, workdir / "repository", backends)
    with LocalTritonServer(repository, [*local.server_args, *extra_args], workdir=workdir, install=install,
                           backends=backends, expected_models=[m.name for m in local.models],
                           stop_timeout=40) as server:
        yield server


@contextmanager
def client_on_own_cpu() -> Iterator[int | None]:
    """Pin this thread (the load generator) to the last CPU for the duration; servers keep every CPU."""
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        yield None
        return
    os.sched_setaffinity(0, {max(cpus)})
    try:
        yield max(cpus)
    finally:
        os.sched_setaffinity(0, cpus)


def load_trace(trace: Path) -> list:
    """Triton's trace of a stopped server, or exit with its log's tail."""
    if not trace_files(trace):
        log = (trace.parent / "tritonserver.log").read_text(errors="replace").splitlines()
        raise SystemExit(f"tritonserver wrote no trace to {trace}; its log ends:\n" + "\n".join(log[-15:]))
    return read_trace(trace)


def full_batch_times_ms(traced, max_batch: int) -> list[float]:
    """Execution times of full batches: requests sharing a COMPUTE_START ran as one batch."""
    batches: dict[int, list] = {}
    for request in traced:
        if request.compute_start_ns is not None and request.compute_us is not None:
            batches.setdefault(request.compute_start_ns, []).append(request.compute_us / 1000)
    return [times[0] for times in batches.values() if len(times) == max_batch]


def calibrate(plan: FleetPlan, model: TritonModelPlan, batch: int, workdir: Path, install: TritonInstall,
              args: argparse.Namespace) -> Calibration:
    """Closed loop on the naive copy at max_batch_size ``batch``: what one instance sustains here, and how
    long a full batch runs."""
    trace = workdir / "calibration-trace.json"
    concurrency = 3 * max(batch, 1)
    name = model.name + NAIVE
    with standin_server(plan, model.name, workdir, install, args.standin_ms, tuple(trace_args(trace)),
                        batch) as server:
        with client_on_own_cpu():
            closed_loop(server.http_url, name, lambda i: infer_body(model, 10**9 + i), concurrency, WARMUP_S)
            started_ns = time.monotonic_ns()
            samples = closed_loop(server.http_url, name, lambda i: infer_body(model, 2 * 10**9 + i), concurrency,
                                  args.calibration_s)
        check_alive(server, f"calibration at max_batch_size {batch}")
    check_clean_exit(server, f"calibration at max_batch_size {batch}")
    traced = [r for r in load_trace(trace) if r.model == name and (r.queue_start_ns or 0) >= started_ns]
    full = full_batch_times_ms(traced, batch)
    executed = [r for r in traced if r.compute_start_ns is not None]
    if not full:
        raise SystemExit(f"calibration ran no full batch of {batch}: raise --calibration-s")
    return Calibration(max_batch_size=batch, capacity_rps=round(sum(s.outcome == "ok" for s in samples) / max(
                           s.done_s for s in samples), 1),
                       answered=sum(s.outcome == "ok" for s in samples), seconds=args.calibration_s,
                       concurrency=concurrency, full_batch_p50_ms=round(percentile(full, 50), 1),
                       full_batch_p99_ms=round(percentile(full, 99), 1), full_batches=len(full),
                       mean_batch=round(len(executed) / len({r.compute_start_ns for r in executed}), 2))


def measured_plan(project: Project, stack: str, model: TritonModelPlan, calibration: Calibration,
                  workdir: Path) -> tuple[FleetPlan, dict]:
    """Compile the model's models.yaml entry, alone, with the measured profile (and the calibrated batch),
    for ``stack`` restricted to the instance family the model is planned on: the compiler would otherwise
    move a model too slow for its SLA to a faster GPU and rescale the figures, which this machine is not."""
    gpu = project.catalogue().instances[model.instance_type].gpu.key
    profile = {"rps_per_instance": calibration.capacity_rps, "compute_ms": calibration.full_batch_p99_ms,
               "measured_on": gpu}
    document = yaml.safe_load(Path(project.models_path).read_text())
    entry = next(m for m in document["models"] if m["name"] == model.name)
    overrides = {**entry.get("overrides", {}), "max_batch_size": calibration.max_batch_size}
    bench = workdir / f"project-b{calibration.max_batch_size}"
    (bench / "stacks").mkdir(parents=True)
    samples = Path(project.models_path).parent / "samples"  # warmup samples models.yaml names
    if samples.is_dir():
        shutil.copytree(samples, bench / "samples")
    (bench / "models.yaml").write_text(yaml.safe_dump({"models": [{**entry, "profile": profile,
                                                                    "overrides": overrides}]}, sort_keys=False))
    stack_file = yaml.safe_load(Path(project.environment_path(stack)).read_text())
    stack_file["config"]["modelfleet:instanceFamilies"] = [model.instance_type.split(".")[0]]
    (bench / "stacks" / Path(project.environment_path(stack)).name).write_text(yaml.safe_dump(stack_file))
    return Project(str(bench), prices_file=project.prices_file).plan(stack), profile


def profile_and_compile(project: Project, stack: str, model: TritonModelPlan, workdir: Path, install: TritonInstall,
                        args: argparse.Namespace) -> tuple[FleetPlan, dict, list[dict]]:
    """Calibrate at the compiled batch and compile from the measurement; while the compiler refuses because
    the measured execution leaves no queueing budget, follow its advice (a smaller max_batch_size)."""
    plan, batch, tried = project.plan(stack), model.max_batch_size, []
    while True:
        calibration = calibrate(plan, model, batch, workdir / f"calibration-b{batch}", install, args)
        try:
            measured, profile = measured_plan(project, stack, model, calibration, workdir)
        except ModelfleetError as error:
            tried.append({**dataclasses.asdict(calibration), "refused": str(error).split(": ", 2)[-1]})
            if batch <= 1 or "no queueing budget" not in str(error):
                raise SystemExit(f"measured here: {tried}\nthe compiler refuses this profile:\n{error}") from None
            batch //= 2
            continue
        tried.append(dataclasses.asdict(calibration))
        return measured, profile, tried


def server_counts(before, after, name: str) -> dict[str, float]:
    """What Triton itself counted for ``name`` during one run."""
    def change(metric: str, **labels: str) -> float:
        try:
            return metric_value(after, metric, model=name, **labels) - metric_value(before, metric, model=name,
                                                                                     **labels)
        except KeyError:
            return 0.0
    return {"cache_hits": change("nv_cache_num_hits_per_model"), "executions": change("nv_inference_exec_count"),
            "rejected_metric": change("nv_inference_request_failure", reason="REJECTED")}


class ServerDied(RuntimeError):
    """The real server died under the load or while stopping; the message says how (signal, kernel log,
    its own crash report). Seen before the tracer work-around (``trace_safe_environment``): SIGSEGV and
    SIGABRT in tritonserver 2.51's trace release, 2 of 5 runs."""


def check_alive(server: LocalTritonServer, during: str) -> None:
    if not server.running():
        raise ServerDied(f"during {during}: {server.death_report()}")


def check_clean_exit(server: LocalTritonServer, during: str) -> None:
    """A server that stopped any other way than exit code 0 wrote no complete trace: say how it ended."""
    status = server.exit_status()
    if status is None or status.code != 0:
        raise ServerDied(f"stopping after {during}: {server.death_report()}")


def schedule(model: TritonModelPlan, requests: int, repeat: float, round_index: int) -> list[bytes]:
    """Request bodies: a ``repeat`` share repeat an earlier input of the same round (seeded, deterministic)."""
    import random

    rng = random.Random(round_index)
    keys = [rng.randrange(i) if i and rng.random() < repeat else i for i in range(requests)]
    return [infer_body(model, round_index * 10**7 + key) for key in keys]


def overload(plan: FleetPlan, model: TritonModelPlan, rate: float, workdir: Path, install: TritonInstall,
             args: argparse.Namespace) -> list[dict]:
    """Every round: the same schedule against the compiled model, then its naive copy."""
    runs, windows, trace = [], [], workdir / "overload-trace.json"
    with standin_server(plan, model.name, workdir, install, args.standin_ms, tuple(trace_args(trace))) as server:
        for round_index in range(1, args.rounds + 1):
            bodies = schedule(model, args.requests, args.repeat_fraction, round_index)
            for variant, name in (("compiled", model.name), ("naive", model.name + NAIVE)):
                before, started_ns = scrape_metrics(server.metrics_url), time.monotonic_ns()
                with client_on_own_cpu():
                    samples = open_loop(server.http_url, name, bodies, rate)
                windows.append((name, started_ns, time.monotonic_ns()))
                check_alive(server, f"round {round_index}, {variant} run")
                summary = summarise(samples, model.p99_latency_ms / 1000, rate)
                counts = server_counts(before, scrape_metrics(server.metrics_url), name)
                runs.append({"round": round_index, "variant": variant, **dataclasses.asdict(summary), **counts,
                             "samples": [[s.due_s, s.latency_s, s.outcome] for s in samples]})
                time.sleep(1.0)
    check_clean_exit(server, f"{args.rounds} round(s)")
    traced = load_trace(trace)
    for run, window in zip(runs, windows):
        run.update(server_side(traced, *window, model.p99_latency_ms))
    return runs


def server_side(traced, name: str, started_ns: int, ended_ns: int, sla_ms: float) -> dict:
    """One run as Triton saw it (its trace): executed requests from HTTP receive to answer sent, and their
    time in the queue. Next to the client's figures, this separates the server from the client and loopback."""
    executed = [r for r in traced if r.model == name and r.compute_start_ns is not None
                and started_ns <= (r.http_recv_start_ns or 0) <= ended_ns and r.server_us is not None]
    server_ms = [r.server_us / 1000 for r in executed]
    queue_ms = [r.queue_us / 1000 for r in executed if r.queue_us is not None]
    if not executed:
        return {"server_p50_ms": None, "server_p99_ms": None, "server_within_sla": 0, "queue_max_ms": None}
    return {"server_p50_ms": round(percentile(server_ms, 50), 1), "server_p99_ms": round(percentile(server_ms, 99), 1),
            "server_within_sla": sum(ms <= sla_ms for ms in server_ms),
            "queue_max_ms": round(max(queue_ms), 1) if queue_ms else None}


def run(args: argparse.Namespace) -> dict:
    project = Project(str(ROOT))
    original = project.plan(args.stack).model(args.model)
    install = find_tritonserver()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-overload-") as tmp:
        plan, profile, calibrations = profile_and_compile(project, args.stack, original, Path(tmp), install, args)
        model = plan.model(args.model)
        rate = args.overload * calibrations[-1]["capacity_rps"]
        runs = overload(plan, model, rate, Path(tmp) / "overload", install, args)
    settings = {"stack": args.stack, "model": args.model, "standin_ms": args.standin_ms, "overload": args.overload,
                "nice": os.getpriority(os.PRIO_PROCESS, 0),
                "rate_rps": round(rate, 1), "requests": args.requests, "repeat_fraction": args.repeat_fraction,
                "rounds": args.rounds, "sla_p99_ms": model.p99_latency_ms, "profile": profile,
                "plan_max_batch_size": original.max_batch_size, "plan_compute_ms": original.compute_ms,
                "plan_rps_per_instance": original.rps_per_instance,
                "compiled": {"max_batch_size": model.max_batch_size, "window_us": model.max_queue_delay_us,
                             "queue_timeout_us": model.queue_timeout_us, "max_queue_size": model.max_queue_size,
                             "compute_ms": model.compute_ms, "rps_per_instance": model.rps_per_instance,
                             "response_cache": model.response_cache, "instance_type": model.instance_type},
                "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs",
                "load_average": [round(x, 2) for x in load_before] + [round(x, 2) for x in os.getloadavg()]}
    return {"settings": settings, "calibrations": calibrations, "runs": runs}


ROWS = (("requests sent (n)", "requests"), ("achieved send rate (req/s)", "achieved_rps"),
        ("client lag behind schedule, p99 (ms)", "lag_p99_ms"), ("answered", "answered"),
        ("answered within SLA", "within_sla"), ("within SLA, share of n", "within_share"),
        ("goodput (answers within SLA / s)", "goodput_rps"), ("goodput / measured capacity", "goodput_share"),
        ("p50 latency of answered (ms)", "p50_ms"), ("p99 latency of answered (ms)", "p99_ms"),
        ("rejected: queue timeout (503)", "rejected_timeout"), ("rejected: queue full (503)", "rejected_queue_full"),
        ("nv_inference_request_failure{REJECTED}", "rejected_metric"), ("other errors", "errors"),
        ("cache hits", "cache_hits"), ("batch executions", "executions"),
        ("server side: executed, p50 HTTP receive to answer sent (ms)", "server_p50_ms"),
        ("server side: executed, p99 (ms)", "server_p99_ms"),
        ("server side: executed within SLA", "server_within_sla"),
        ("server side: longest queue time of an executed request (ms)", "queue_max_ms"))
RATIOS = ("within_sla", "goodput_rps", "p50_ms", "p99_ms")


def derived(run: dict, capacity: float) -> dict:
    return {**run, "within_share": f"{run['within_sla'] / run['requests']:.1%}",
            "goodput_share": f"{run['goodput_rps'] / capacity:.0%}"}


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "n/a"
    if b == 0:
        return "naive 0" if a else "both 0"
    return f"{a / b:.2f}x"


def markdown(report: dict) -> str:
    s = report["settings"]
    lines = [f"# Overload: compiled vs naive Triton config ({s['model']}, stack {s['stack']})", "",
             f"Real tritonserver 2.51 (CPU) on {s['machine']}, shared with other work: load average before/after "
             f"{' / '.join(map(str, s['load_average']))} (1, 5, 15 min); bench, server and client at nice "
             f"{s['nice']}.", "", "## Calibration (closed loop, naive copy, one instance)", "",
             f"Stand-in sleeping {s['standin_ms']:g} ms per batch, plus whatever making and returning its outputs "
             f"costs here (the plan assumes {s['plan_compute_ms']:g} ms per batch of {s['plan_max_batch_size']} "
             f"and {s['plan_rps_per_instance']:g} req/s on its GPU).", ""]
    lines += [calibration_line(c) for c in report["calibrations"]]
    c = s["compiled"]
    lines += ["", f"Compiled from the last profile (`{json.dumps(s['profile'])}`, max_batch_size "
              f"{c['max_batch_size']}, {c['instance_type']}): window {c['window_us']} us, queue timeout "
              f"{c['queue_timeout_us']} us (REJECT), max_queue_size {c['max_queue_size']}, execution "
              f"{c['compute_ms']:g} ms, response cache {'on' if c['response_cache'] else 'off'}; SLA p99 "
              f"{s['sla_p99_ms']:g} ms.", "", "## Overload (open loop)", "",
              f"{s['requests']} requests per run at {s['rate_rps']} req/s = {s['overload']:g} x the measured capacity, "
              f"{s['repeat_fraction']:.0%} repeating an earlier input; latency from the scheduled send time; "
              f"{s['rounds']} round(s), compiled then naive.", ""]
    lines += [f"- {label}: {text}" for label, text in VARIANTS.items()]
    return "\n".join(lines + ["", *table(report)]) + "\n"


def calibration_line(c: dict) -> str:
    line = (f"- max_batch_size {c['max_batch_size']}: {c['concurrency']} clients for {c['seconds']:g} s, "
            f"**capacity {c['capacity_rps']} req/s** ({c['answered']} answers, mean batch {c['mean_batch']}); a "
            f"full batch executes in {c['full_batch_p50_ms']} ms (p50) / **{c['full_batch_p99_ms']} ms (p99)** "
            f"over {c['full_batches']} full batches (Triton's trace)")
    return line + (f"; the compiler refuses it: {c['refused']}" if "refused" in c else ".")


def table(report: dict) -> list[str]:
    capacity = report["calibrations"][-1]["capacity_rps"]
    runs = [derived(r, capacity) for r in report["runs"]]
    heads = [f"{r['variant']} (round {r['round']})" for r in runs]
    lines = ["| | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(runs)]
    lines += [f"| {title} | " + " | ".join(str(r[key]) for r in runs) + " |" for title, key in ROWS]
    for round_index in sorted({r["round"] for r in runs}):
        pair = {r["variant"]: r for r in runs if r["round"] == round_index}
        cells = ", ".join(f"{key} {ratio(pair['compiled'][key], pair['naive'][key])}" for key in RATIOS)
        lines.append(f"\nRound {round_index}, compiled / naive: {cells}.")
    return lines


def plot(report: dict, path: Path) -> bool:
    """Latency of each answered request over its scheduled send time, round 1, with the SLA line."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for run, colour in zip([r for r in report["runs"] if r["round"] == 1], ("tab:green", "tab:red")):
        points = [(due, latency * 1000) for due, latency, outcome in run["samples"] if outcome == "ok"]
        if points:
            axis.scatter(*zip(*points), s=5, color=colour, label=f"{run['variant']}: answered ({len(points)})")
    axis.axhline(report["settings"]["sla_p99_ms"], color="black", linestyle="--", label="SLA p99")
    axis.set(yscale="log", xlabel="scheduled send time (s)", ylabel="latency from scheduled send (ms)",
             title=f"{report['settings']['model']}: {report['settings']['overload']:g}x measured capacity")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return True


def runs_summary(outcomes: list[dict | str], args: argparse.Namespace) -> str:
    """One line per repeated run of the whole bench: did the server live, and the compiled and naive figures."""
    lines = [f"# Overload bench repeated: {sum(isinstance(o, dict) for o in outcomes)} of {len(outcomes)} runs "
             f"completed ({args.model}, stack {args.stack}, {args.rounds} round(s) each)", "",
             "| run | capacity (req/s) | compiled: goodput, share of capacity, p99 (ms) | naive: goodput, share, "
             "p99 (ms) |", "|---:|---:|---|---|"]
    for index, outcome in enumerate(outcomes, 1):
        if isinstance(outcome, str):
            lines.append(f"| {index} | server died | {outcome.splitlines()[0][:150]} | |")
            continue
        capacity = outcome["calibrations"][-1]["capacity_rps"]
        cells = {variant: "; ".join(f"{r['goodput_rps']}, {r['goodput_rps'] / capacity:.0%}, {r['p99_ms']}"
                                    for r in outcome["runs"] if r["variant"] == variant)
                 for variant in VARIANTS}
        lines.append(f"| {index} | {capacity} | {cells['compiled']} | {cells['naive']} |")
    return "\n".join(lines) + "\n"


def write_report(report: dict, stem: Path) -> str:
    text = markdown(report)
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    drawn = plot(report, stem.with_suffix(".png"))
    return text + f"\nwrote {stem}.md, .json{', .png' if drawn else ' (no matplotlib: no plot)'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--model", default="image-preprocessor")
    parser.add_argument("--standin-ms", type=float, default=5.0, help="the stand-in's sleep per batch")
    parser.add_argument("--calibration-s", type=float, default=8.0)
    parser.add_argument("--overload", type=float, default=3.0, help="x the measured capacity")
    parser.add_argument("--requests", type=int, default=3000, help="per run")
    parser.add_argument("--repeat-fraction", type=float, default=0.2, help="share of requests repeating an input")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1,
                        help="repeat the whole bench (calibration and rounds, new servers) this many times; "
                             "writes the last completed report and, above 1, a table of every run (-runs.md)")
    parser.add_argument("--nice", type=int, default=0,
                        help="scheduling priority change for the bench, its server and client (negative needs root): "
                             "on a machine shared with other work, a negative value keeps that work from "
                             "dominating the measurement")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    if args.nice:
        os.nice(args.nice)
    outcomes: list[dict | str] = []
    for index in range(1, args.runs + 1):
        try:
            outcomes.append(run(args))
        except ServerDied as error:
            print(f"overload.py: run {index} of {args.runs}: {error}", file=sys.stderr)
            outcomes.append(str(error))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"overload-{args.stack}-{args.model}"
    completed = [o for o in outcomes if isinstance(o, dict)]
    if completed:
        print(write_report(completed[-1], stem))
    if args.runs > 1:
        summary = runs_summary(outcomes, args)
        Path(f"{stem}-runs.md").write_text(summary)
        print(summary + f"wrote {stem}-runs.md")
    return 0 if len(completed) == len(outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
