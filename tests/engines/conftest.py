"""Shared pieces of the real-engine tests: the example's local artifacts and a served local repository.

Servers are started through the same code path as ``modelfleet serve`` (plan_local_repository ->
write_local_repository -> LocalTritonServer) and always stopped by the ``with`` block, even when a test fails.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"
PREPROCESSOR = "acme-ml-models/triton/image-preprocessor"


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
    """A local artifact root like examples/s3 with only the named ONNX models (and maybe the preprocessor).

    Why not examples/s3 itself: tests must not depend on set-up having run, and leaving artifacts out is how
    the synthetic stand-ins are exercised.
    """
    generator().write_artifacts(target, onnx_models)
    if preprocessor:
        shutil.copytree(EXAMPLES / "s3" / PREPROCESSOR, target / PREPROCESSOR,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return target


@contextmanager
def served(plan, artifact_root: Path, workdir: Path, servers: tuple[str, ...] = ()) -> Iterator[tuple]:
    """(LocalTritonServer, LocalRepository) for ``plan`` as ``modelfleet serve`` would run it."""
    from modelfleet.commands.serve import available_backends
    from modelfleet.engines.tritonserver import LocalTritonServer, find_tritonserver, prepare_backends
    from modelfleet.serve import plan_local_repository, write_local_repository

    install = find_tritonserver()
    local = plan_local_repository(plan, artifact_root, available_backends(install), servers)
    backends = prepare_backends(install, workdir)
    repository = write_local_repository(local, workdir / "repository", backends)
    with LocalTritonServer(repository, local.server_args, workdir=workdir, install=install,
                           stop_timeout=local.exit_timeout_secs + 5.0) as server:
        wait_for(server.metrics_url)
        yield server, local


def wait_for(url: str, seconds: float = 10.0) -> None:
    """Readiness covers HTTP and gRPC; the metrics endpoint starts a few ms later (a race seen here)."""
    from modelfleet.engines.tritonserver import http_ok

    deadline = time.monotonic() + seconds
    while not http_ok(url):
        assert time.monotonic() < deadline, f"{url} did not answer within {seconds} s"
        time.sleep(0.05)


@pytest.fixture(scope="session")
def dev_plan(project):
    return project.plan("dev")
