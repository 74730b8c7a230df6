"""A compiled fleet's Triton models as a model repository this CPU-only machine can serve, and why each differs.

The contract of ``modelfleet serve``: queue policy, batching, cache and tensors stay exactly as compiled. What
a CPU machine must change is changed here and nowhere else, and every change is returned as a line of text
for the command to print:

* ``instance_group``: ``KIND_GPU`` -> ``KIND_CPU`` (same count): there is no GPU to place instances on (a
  model compiled for KIND_CPU instances keeps its config as compiled, thread counts included);
* the response cache: the plan sizes it from a GPU node's spare RAM (GiB); capped to a local size;
* the compiled servers run as one local tritonserver (one set of endpoints), unless one is chosen;
* backends this server lacks (onnxruntime, tensorrt, ...) become python-based backends of the same name
  (:mod:`modelfleet.serve.runners`), so the config.pbtxt keeps its ``backend``/``platform``; the model then
  runs its real ONNX artifact when one is found locally, else a SYNTHETIC stand-in with its tensors.

Local artifacts: ``s3://BUCKET/KEY`` is looked up as ``<artifact_root>/BUCKET/KEY`` (the example fleet's
live in ``examples/s3``); an artifact given as a local directory is used as is.

:func:`plan_local_repository` is pure (it only looks at which local files exist); :func:`write_local_repository`
writes the directory tree.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from tritonclient.grpc import model_config_pb2 as mc

from ..errors import CompileError, Issue
from ..plan.types import FleetPlan, PipelineLlmStepPlan, PipelinePlan, TritonModelPlan, TritonServerPlan
from ..render.ensemble import ensemble_config
from ..render.llm_step import MODEL_PY as LLM_STEP_MODEL_PY
from ..render.llm_step import llm_step_config
from ..render.triton import model_config, render_config
from ..render.warmup import warmup_files
from ..spec.units import GIB
from .runners import SYNTHETIC_SETTINGS, SYNTHETIC_SOURCE, backend_files

# One response cache in this machine's RAM: enough for thousands of small answers, never the plan's GiBs.
LOCAL_CACHE_CAP_BYTES = 256 * 1024**2
# Flags of the compiled command line that a local server sets itself (LocalTritonServer: loopback, free ports).
LOCAL_OWNED_FLAGS = ("--model-repository=", "--http-port=", "--grpc-port=", "--metrics-port=", "--cache-config=",
                     "--trace-config=",  # the stack's tracing exports to the cluster's collector
                     "--model-load-thread-count=")
# One model loads at a time here. Measured on this shared 2-core machine (load average 10 to 15): with
# Triton's default of 4 at once, the whole dev fleet failed to start in 2 of 11 runs, the image-preprocessor's
# warmup failing with "Stub process 'image-preprocessor_0_0' is not healthy" (a python stub starved of CPU by
# the others starting beside it misses the python backend's health check, and a failed warmup fails the
# load); one at a time, none of 6 failed (tests/engines/test_warmup.py).
LOCAL_LOAD_THREADS = 1

Source = Literal["artifact", "onnx-runner", "synthetic", "ensemble", "llm-step"]
# The file each backend loads from a version folder (Triton's default_model_filename), see REFERENCE.md.
MODEL_FILES = {"python": "model.py", "onnxruntime": "model.onnx", "tensorrt": "model.plan", "pytorch": "model.pt",
               "tensorflow": "model.savedmodel", "openvino": "model.xml"}


@dataclass(frozen=True)
class LocalModel:
    """How one compiled model is served here; ``config_text`` is what goes into its config.pbtxt."""

    name: str
    server: str
    backend: str
    source: Source
    local_dir: Path | None  # the local copy of the artifact (None for a synthetic stand-in)
    versions: tuple[int, ...]
    note: str  # one line for the user: what runs, and why
    config_text: str
    compute_ms: float
    rps_per_instance: float
    response_cache: bool
    files: tuple[tuple[str, bytes], ...] = ()  # beside config.pbtxt: the warmup samples its config reads


@dataclass(frozen=True)
class LocalRepository:
    models: tuple[LocalModel, ...]
    server_args: tuple[str, ...]
    python_based_backends: tuple[str, ...]  # backend names to install as python-based backends
    adaptations: tuple[str, ...]  # every difference from the compiled deployment, one line each
    exit_timeout_secs: int

    @property
    def synthetic(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models if m.source == "synthetic")


def local_artifact_dir(artifact: str, artifact_root: Path) -> Path:
    """``s3://bucket/key`` -> ``<artifact_root>/bucket/key``; a local path stays itself."""
    if artifact.startswith("s3://"):
        return Path(artifact_root) / artifact.removeprefix("s3://").strip("/")
    return Path(artifact)


def local_model_config(model: TritonModelPlan) -> mc.ModelConfig:
    """The compiled ModelConfig with the one change a CPU needs: instances of KIND_CPU (same count)."""
    config = model_config(model)
    for group in config.instance_group:
        group.kind = mc.ModelInstanceGroup.KIND_CPU
        del group.gpus[:]
    return config


def _versions(directory: Path, filename: str) -> tuple[int, ...]:
    """Numeric version folders of ``directory`` holding ``filename``."""
    if not directory.is_dir():
        return ()
    return tuple(sorted(int(p.name) for p in directory.iterdir()
                        if p.name.isdigit() and (p / filename).exists()))


class Choice(NamedTuple):
    source: Source
    local_dir: Path | None
    versions: tuple[int, ...]
    note: str


def _source(model: TritonModelPlan, root: Path, available: frozenset[str]) -> Choice:
    """Which implementation serves ``model`` here, from which local directory, which versions, and why."""
    local = local_artifact_dir(model.artifact, root)
    wanted = model.versions
    native = model.backend in available
    filename = MODEL_FILES.get(model.backend, "model.py") if native else "model.onnx"
    usable = tuple(v for v in _versions(local, filename) if not wanted or v in wanted)
    if usable and (not wanted or set(wanted) <= set(usable)):
        if native:
            return Choice("artifact", local, usable, f"real artifact {local} on the {model.backend} backend")
        export = "" if model.backend == "onnxruntime" else f" (an ONNX export: {model.backend} cannot run here)"
        return Choice("onnx-runner", local, usable,
                      f"real artifact {local}/<v>/model.onnx{export} through onnxruntime in a python-based "
                      f"'{model.backend}' backend (this tritonserver has none)")
    return Choice("synthetic", None, wanted or (1,),
                  f"SYNTHETIC stand-in: no {local}/<version>/{filename} here; same tensors, zeros, takes "
                  f"max({model.compute_ms:g} ms, n / {model.rps_per_instance:g} rps) per batch")


def local_server_args(servers: tuple[TritonServerPlan, ...], caching: bool,
                      cache_cap_bytes: int = LOCAL_CACHE_CAP_BYTES) -> tuple[tuple[str, ...], list[str]]:
    """The compiled servers' flags minus what the local server owns, with the cache capped; and the notes."""
    args: list[str] = []
    for server in servers:
        args += [a for a in server.args[1:] if not a.startswith(LOCAL_OWNED_FLAGS) and a not in args]
    args.append(f"--model-load-thread-count={LOCAL_LOAD_THREADS}")
    notes = [f"models load one at a time (--model-load-thread-count={LOCAL_LOAD_THREADS}): a python model's warmup "
             "starved of CPU by the others loading beside it can miss the python backend's health check, which "
             "fails its load"]
    if any(a.startswith("--trace-config=") for server in servers for a in server.args):
        notes.append("OpenTelemetry tracing (modelfleet:triton.tracing): off here, its collector is the cluster's")
    planned = max((s.cache_size_bytes for s in servers), default=0)
    if caching and planned > 0:
        size = min(planned, cache_cap_bytes)
        args.append(f"--cache-config=local,size={size}")
        if size < planned:
            notes.append(f"response cache: {planned / GIB:.1f} GiB in the plan (a GPU node's spare RAM), capped to "
                         f"{size // 1024**2} MiB here (--cache-config=local,size={size})")
    return tuple(args), notes


def _exit_timeout(args: tuple[str, ...]) -> int:
    return next((int(a.split("=", 1)[1]) for a in args if a.startswith("--exit-timeout-secs=")), 30)


def plan_local_repository(plan: FleetPlan, artifact_root: Path, available_backends: frozenset[str],
                          servers: tuple[str, ...] = (), llm_urls: Mapping[str, str] | None = None) -> LocalRepository:
    """Decide how every classic model of ``plan`` (or of the named ``servers``) is served on this machine.
    ``llm_urls``: where each LLM a pipeline's step calls answers here (its /v1/completions URL, ``serve --llm``'s
    vLLM say); a pipeline with an LLM step not given one is left out, with a note saying how to serve it."""
    chosen = _chosen_servers(plan, servers)
    urls = dict(llm_urls or {})
    _check_llm_urls(plan, urls)
    models = []
    for server in chosen:
        for name in server.models:
            model = plan.model(name)
            if isinstance(model, TritonModelPlan):
                models.append(_local_model(model, Path(artifact_root), available_backends))
    left_out: list[str] = []
    for pipeline in (p for p in plan.pipelines if p.server in {s.name for s in chosen}):
        missing = sorted({step.llm for step in pipeline.llm_steps} - set(urls))
        if missing:
            left_out += [f"pipeline {pipeline.name} left out: its LLM step calls {llm}'s vLLM Service, not here; "
                         f"`modelfleet serve --llm {llm}` serves it on a real vLLM, then `--llm-url "
                         f"{llm}=http://127.0.0.1:PORT/v1/completions` points the step at it" for llm in missing]
            continue
        models.append(_local_ensemble(pipeline))
        models += [_local_llm_step(pipeline, step, urls[step.llm]) for step in pipeline.llm_steps]
    if not models:
        raise CompileError([Issue("", 0, 0, "serve", f"stack {plan.environment} has no classic Triton models to serve",
                                  "add a classic model to models.yaml or pick another stack")])
    args, notes = local_server_args(chosen, any(m.response_cache for m in models))
    lacking = sorted({m.backend for m in models if m.backend not in available_backends and m.source != "ensemble"})
    adaptations = ["instance_group: KIND_GPU -> KIND_CPU for every GPU model (no GPU here; instance counts "
                   "unchanged); KIND_CPU models run as compiled",
                   *notes, "endpoints: loopback on free ports instead of 8000/8001/8002", *left_out]
    if len(chosen) > 1:
        adaptations.append(f"{len(chosen)} compiled Triton servers ({', '.join(s.name for s in chosen)}) run in one "
                           f"local tritonserver (--server NAME serves one)")
    if lacking:
        adaptations.append(f"backends missing here, installed as python-based backends of the same name: "
                           f"{', '.join(lacking)} (config.pbtxt unchanged)")
    return LocalRepository(tuple(sorted(models, key=lambda m: m.name)), args, tuple(lacking), tuple(adaptations),
                           _exit_timeout(args))


def _chosen_servers(plan: FleetPlan, names: tuple[str, ...]) -> tuple[TritonServerPlan, ...]:
    known = {s.name: s for s in plan.triton_servers}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise CompileError([Issue("", 0, 0, "serve", f"no Triton server {n!r} in stack {plan.environment}",
                                  f"choose one of: {', '.join(sorted(known))}") for n in unknown])
    return tuple(known[n] for n in names) if names else tuple(plan.triton_servers)


def _local_model(model: TritonModelPlan, root: Path, available: frozenset[str]) -> LocalModel:
    source, local_dir, versions, note = _source(model, root, available)
    return LocalModel(name=model.name, server=model.server, backend=model.backend, source=source,
                      local_dir=local_dir, versions=versions, note=note,
                      config_text=render_config(local_model_config(model)), compute_ms=model.compute_ms,
                      rps_per_instance=model.rps_per_instance, response_cache=model.response_cache,
                      files=tuple(sorted(warmup_files(model).items())))


def _check_llm_urls(plan: FleetPlan, urls: Mapping[str, str]) -> None:
    """Every --llm-url names an LLM some pipeline step of the stack calls, and an http URL of its completions
    endpoint (what the step's model.py accepts, so it fails here rather than at the model's load)."""
    called = sorted({step.llm for p in plan.pipelines for step in p.llm_steps})
    issues = []
    for llm, url in sorted(urls.items()):
        if llm not in called:
            issues.append(Issue("", 0, 0, "--llm-url", f"no pipeline step of stack {plan.environment} calls an LLM "
                                f"named {llm!r}", f"name one of: {', '.join(called)}" if called else
                                "this stack's pipelines have no LLM step: leave --llm-url out"))
            continue
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or not parts.path.endswith("/v1/completions"):
            issues.append(Issue("", 0, 0, "--llm-url", f"{llm}={url!r} is not an http URL of a completions endpoint",
                                f"write {llm}=http://HOST:PORT/v1/completions (serve --llm prints its port)"))
    if issues:
        raise CompileError(issues)


def _local_llm_step(pipeline: PipelinePlan, step: PipelineLlmStepPlan, url: str) -> LocalModel:
    """A pipeline's LLM step as rendered, its ``url`` the local one: the same python model and parameters."""
    return LocalModel(name=step.name, server=pipeline.server, backend="python", source="llm-step", local_dir=None,
                      versions=(1,), note=f"LLM step: calls {step.llm} at {url} (in the cluster: {step.url}), "
                                          f"max_tokens {step.max_output_tokens}, timeout {step.timeout_ms} ms",
                      config_text=render_config(llm_step_config(pipeline, step.model_copy(update={"url": url}))),
                      compute_ms=0.0, rps_per_instance=0.0, response_cache=False,
                      files=(("1/model.py", LLM_STEP_MODEL_PY.encode()),))


def _local_ensemble(pipeline: PipelinePlan) -> LocalModel:
    """A pipeline's ensemble, unchanged: it has no instances to move to the CPU, and no files."""
    steps = " -> ".join(step.model for step in pipeline.steps)
    return LocalModel(name=pipeline.name, server=pipeline.server, backend="ensemble", source="ensemble",
                      local_dir=None, versions=(1,), note=f"ensemble {steps}, as compiled",
                      config_text=render_config(ensemble_config(pipeline)), compute_ms=0.0, rps_per_instance=0.0,
                      response_cache=False)


def write_local_repository(local: LocalRepository, repository: Path, backends: Path) -> Path:
    """Replace ``repository`` with the local model repository; add python-based backends under ``backends``."""
    repository = Path(repository)
    shutil.rmtree(repository, ignore_errors=True)
    for model in local.models:
        target = repository / model.name
        target.mkdir(parents=True)
        (target / "config.pbtxt").write_text(model.config_text)
        for relative, content in model.files:
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            (target / relative).write_bytes(content)
        for version in model.versions:
            _write_version(model, target / str(version), version)
    for name in local.python_based_backends:
        (Path(backends) / name).mkdir(parents=True, exist_ok=True)
        for filename, text in backend_files().items():
            _write_if_changed(Path(backends) / name / filename, text)
    return repository


def _write_if_changed(path: Path, text: str) -> None:
    """Atomic, and untouched when equal: the backends directory is shared by concurrent ``serve`` runs, whose
    servers may be loading these very files."""
    if path.is_file() and path.read_text() == text:
        return
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(text)
    partial.replace(path)


def _write_version(model: LocalModel, target: Path, version: int) -> None:
    if model.source == "llm-step":
        return  # its model.py is one of its files
    if model.source == "ensemble":
        target.mkdir(parents=True)  # Triton needs the version folder; an ensemble has nothing in it
        return
    if model.local_dir is not None:
        shutil.copytree(model.local_dir / str(version), target, ignore=shutil.ignore_patterns("__pycache__"))
        return
    target.mkdir(parents=True)
    settings = {"compute_ms": model.compute_ms, "rps_per_instance": model.rps_per_instance, "synthetic": True}
    (target / SYNTHETIC_SETTINGS).write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    if model.backend == "python":
        (target / "model.py").write_text(SYNTHETIC_SOURCE)
