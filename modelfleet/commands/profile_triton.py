"""``modelfleet profile`` for Triton models: which models can be measured, the local servers, the table printed.

Measured: models answered by their real implementation (a real artifact, or the ONNX runner), one request at a
time per batch size. Left out, with the reason printed: SYNTHETIC stand-ins (they take the plan's own time:
measuring them would write the plan's assumption back as a measurement), stateful models (their requests need
sequence ids and control inputs) and streaming ones (several responses per request), and pipelines (their
steps are measured one by one). The local repository runs without the batching window and the response cache
(engines/triton_profile.py says why); everything else as compiled, as ``modelfleet serve`` serves it.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..engines.triton_profile import BatchMeasurement, batch_sizes, measure_batch, usable
from ..plan.types import FleetPlan, TritonModelPlan
from ..spec.profiles import CPU
from .profile import measured_on
from .profile_yaml import classic_block

LOCAL_CHANGES = ("batching window 0 (a lone partial batch would wait it out)",
                 "response cache off (repeats would be answered from memory)",
                 "no queue timeout (a slow execution on this CPU must be measured, not rejected)")
PROFILING_TIMEOUT_US = 0  # Triton: 0 = never times out


def _why_not(model: TritonModelPlan) -> str | None:
    if model.sequence is not None:
        return "stateful: its requests need sequence ids and control inputs"
    if model.decoupled:
        return "streaming: several responses per request"
    return None


def selected(plan: FleetPlan, names: list[str]) -> list[TritonModelPlan]:
    """The Triton models to measure: those named (all by default), less those that cannot be (said why)."""
    triton = [m for m in plan.models if isinstance(m, TritonModelPlan)]
    unknown = sorted(set(names) - {m.name for m in triton})
    if unknown:
        print(f"not Triton models of stack {plan.environment}: {', '.join(unknown)}", flush=True)
    out = []
    for model in triton:
        if names and model.name not in names:
            continue
        reason = _why_not(model)
        if reason:
            print(f"{model.name}: not measured ({reason})", flush=True)
        else:
            out.append(model)
    return out


def for_profiling(plan: FleetPlan) -> FleetPlan:
    """The plan as the local profiling server runs it: no batching window, no response cache, no rejections."""
    def relaxed(model: TritonModelPlan) -> TritonModelPlan:
        levels = tuple(lv.model_copy(update={"queue_timeout_us": PROFILING_TIMEOUT_US}) for lv in model.priority_levels)
        return model.model_copy(update={"max_queue_delay_us": 0, "response_cache": False,
                                        "queue_timeout_us": PROFILING_TIMEOUT_US, "priority_levels": levels})

    models = tuple(relaxed(m) if isinstance(m, TritonModelPlan) else m for m in plan.models)
    return plan.model_copy(update={"models": models})


@contextmanager
def local_server(plan: FleetPlan, models: list[TritonModelPlan], root: Path, workdir: Path) -> Iterator[tuple[str, list]]:
    """A local tritonserver with ``models`` (as ``modelfleet serve`` runs them, less window and cache); yields its
    HTTP URL and the models it serves with their real implementation."""
    from ..engines.tritonserver import LocalTritonServer, find_tritonserver, prepare_backends
    from ..serve import plan_local_repository, write_local_repository
    from .serve import available_backends, run_directory

    install = find_tritonserver()
    names = {m.name for m in models}
    local = plan_local_repository(for_profiling(plan), root, available_backends(install), ())
    local = dataclasses.replace(local, models=tuple(m for m in local.models if m.name in names))
    for m in local.models:
        if m.source == "synthetic":
            print(f"{m.name}: not measured (SYNTHETIC stand-in: it takes the plan's own time; put its artifact "
                  f"under {root})", flush=True)
    real = [m for m in models if any(l.name == m.name and l.source != "synthetic" for l in local.models)]
    print("local tritonserver (CPU), as `modelfleet serve` runs it, and for profiling: "
          + "; ".join(LOCAL_CHANGES), flush=True)
    backends = prepare_backends(install, workdir)
    with run_directory(workdir) as run_dir:
        repository = write_local_repository(local, run_dir / "repository", backends)
        with LocalTritonServer(repository, list(local.server_args), workdir=run_dir, install=install,
                               backends=backends, expected_models=[m.name for m in local.models],
                               stop_timeout=local.exit_timeout_secs + 5.0) as server:
            yield server.http_url, real


def measure_model(url: str, model: TritonModelPlan, seconds: float) -> list[BatchMeasurement] | None:
    """Every batch size of ``model``, printed as measured; None (and why) when a run has failures."""
    rows = []
    for batch in batch_sizes(model.max_batch_size):
        row = measure_batch(url, model, batch, seconds)
        print(f"  {model.name:24} batch {batch:5}  {row.answered:6} answered in {row.seconds:6.2f} s  "
              f"{row.throughput_rps:10.1f} items/s  p50 {row.p50_ms} ms  p99 {row.p99_ms} ms", flush=True)
        if not usable(row):
            print(f"{model.name}: not written: {row.requests - row.answered} of {row.requests} requests failed "
                  f"({row.first_error}), or fewer than 20 answered", flush=True)
            return None
        rows.append(row)
    return rows


def measure_triton(plan: FleetPlan, args: argparse.Namespace, project, date: str,
                   workdir: Path) -> dict[str, dict[str, Any]]:
    models = selected(plan, args.model)
    if not models:
        return {}
    if args.url:
        return _measure_all(plan, args.url.rstrip("/"), models, args, project, date)
    root = Path(args.model_dir_root or Path(project.root) / "examples" / "s3")
    with local_server(plan, models, root, workdir) as (url, real):
        return _measure_all(plan, url, real, args, project, date)


def _measure_all(plan: FleetPlan, url: str, models: list[TritonModelPlan], args: argparse.Namespace, project,
                 date: str) -> dict[str, dict[str, Any]]:
    blocks = {}
    specs = {m.name: m for m in project.fleet().models}
    for model in models:
        where = measured_on(plan, model, args.measured_on, args.url, project)
        rows = measure_model(url, model, args.seconds)
        if rows and _keeps_gpu_profile(specs[model.name], where, args.print):
            continue
        if rows:
            blocks[model.name] = classic_block(rows, where, date)
    return blocks


def _keeps_gpu_profile(spec, where: str, printing: bool) -> bool:
    """A CPU measurement never replaces a GPU one that the plan uses (it would not apply to the GPU plan:
    spec/profiles.py); only a python-backend model's, whose execute() runs on the CPU either way."""
    profile = spec.profile
    keep = (where == CPU and spec.framework != "python" and profile.measured and profile.measured_on != CPU
            and not printing)
    if keep:
        print(f"{spec.name}: its profile measured on {profile.measured_on} is kept: a CPU measurement does not apply "
              "to its GPU plan (--print shows it; measure the GPU endpoint with --url)", flush=True)
    return keep
