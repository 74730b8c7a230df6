"""Start the real ``tritonserver`` shipped inside the PyPI wheel ``nvidia-pytriton`` (0.7.0) on this machine.

Why: the compiler writes Triton model repositories (``config.pbtxt`` with dynamic batching, queue policies,
the response cache); the only honest proof that they load and behave is a real server. The wheel carries a
CPU-capable tritonserver 2.51 with the python backend and the local cache, but it is laid out for pytriton's
own use, so three things must be arranged by hand:

* ``LD_LIBRARY_PATH`` must include ``nvidia_pytriton.libs`` (libtritonserver, libcudart, ... live there);
* the python backend needs ``triton_python_backend_stub`` built for the *running* Python (the wheel keeps one
  per minor version in ``python_backend_stubs/3.X/``), so :func:`prepare_backends` copies ``backends/`` into a
  work directory and drops the matching stub into ``python/``;
* the stub embeds ``libpython3.X.so`` through pybind11 with an *isolated* config, so ``PYTHONPATH`` is
  ignored (tried: numpy was not found). Its ``sys.prefix`` is computed like that of a ``python3`` found on
  ``PATH``: putting the running interpreter's ``bin`` directory first on ``PATH`` makes the stub start inside
  the same (virtual) environment (``pyvenv.cfg`` is honoured), so ``numpy``/``onnxruntime`` installed there
  import in ``model.py``. pytriton itself does the same. The stub needs a shared ``libpython3.X.so.1.0``;
  when the running interpreter was built with ``--enable-shared`` its ``LIBDIR`` is put on
  ``LD_LIBRARY_PATH`` so the stub runs the very same libpython as this process (otherwise it falls back to
  the system one, e.g. Debian's 3.11.2 with the venv's 3.11.7 stdlib, which also works). Triton's other way,
  the ``EXECUTION_ENV_PATH`` model parameter, wants a conda-pack tarball and is not needed here.

Usage (metrics helpers in :mod:`modelfleet.engines.probes`)::

    with LocalTritonServer(repo, ["--cache-config=local,size=1048576"], expected_models=["m"]) as server:
        urllib.request.urlopen(server.http_url + "/v2/models/m/ready")
        samples = scrape_metrics(server.metrics_url)
        metric_value(samples, "nv_cache_num_hits_per_model", model="m")

Only the standard library is used here, so the compiler can import this module without the wheel.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from .connections import CannotClose, close_idle_connections, connected_sockets
from .exit_status import ExitStatus, death_report, from_returncode, kernel_messages, peek_exit
from .probes import http_ok
from .process import die_with_parent, listens_on, signal_group
from .trace import trace_safe_environment, traces

STUB_NAME = "triton_python_backend_stub"


class EngineUnavailable(Exception):
    """The engine is not installed here (e.g. the ``nvidia-pytriton`` wheel is missing)."""


class EngineStartError(Exception):
    """The engine was found but died or did not become ready; the message ends with its log tail."""


class PortTaken(EngineStartError):
    """Another process bound one of the chosen ports between choosing and binding (retried)."""


@dataclass(frozen=True)
class TritonInstall:
    """Where the pieces of the wheel's tritonserver live (all absolute paths)."""

    root: Path  # .../site-packages/pytriton/tritonserver
    binary: Path  # root/bin/tritonserver
    backends_dir: Path  # root/backends (python backend without a stub)
    caches_dir: Path  # root/caches (local response cache)
    stubs_dir: Path  # root/python_backend_stubs (one <major.minor>/triton_python_backend_stub per Python)
    libs_dir: Path  # .../site-packages/nvidia_pytriton.libs
    # The Python whose environment the python stubs run in (None: this one). Another venv's, when this one's
    # packages break the stub: vLLM's venv has numpy 2, and the 2.51 stub then garbles BYTES inputs
    # ("unpack_from requires a buffer of at least 151587085 bytes", measured here); it must be the same X.Y.
    python: Path | None = None


def find_tritonserver(python: Path | str | None = None) -> TritonInstall:
    """Locate the wheel's tritonserver without importing pytriton (its import pulls in heavy deps): this
    Python's, or with ``python`` that interpreter's (whose environment the stubs then run in)."""
    package = _pytriton_package(python)
    if package is None:
        raise EngineUnavailable(f"tritonserver not found{f' for {python}' if python else ''}: install the wheel "
                                "`nvidia-pytriton==0.7.0` (pip install 'modelfleet[serve]')")
    root = package / "tritonserver"
    install = TritonInstall(root=root, binary=root / "bin" / "tritonserver", backends_dir=root / "backends",
                            caches_dir=root / "caches", stubs_dir=root / "python_backend_stubs",
                            libs_dir=package.parent / "nvidia_pytriton.libs",
                            python=Path(python) if python else None)
    missing = [p for p in (install.binary, install.backends_dir, install.caches_dir, install.libs_dir)
               if not p.exists()]
    if missing:
        raise EngineUnavailable(f"nvidia-pytriton at {package} is incomplete, missing: "
                                + ", ".join(str(p) for p in missing))
    return install


_FIND_PACKAGE = ("import importlib.util; s = importlib.util.find_spec('pytriton'); "
                 "print(next(iter(s.submodule_search_locations)) if s and s.submodule_search_locations else '')")


def _pytriton_package(python: Path | str | None) -> Path | None:
    if python is None:
        spec = importlib.util.find_spec("pytriton")
        found = next(iter(spec.submodule_search_locations)) if spec and spec.submodule_search_locations else ""
    else:
        try:
            found = subprocess.run([str(python), "-c", _FIND_PACKAGE], capture_output=True, text=True, timeout=60,
                                   check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    return Path(found).resolve() if found else None


def prepare_backends(install: TritonInstall, workdir: Path) -> Path:
    """Copy ``backends/`` under ``workdir`` with the python stub for this interpreter; return the copy.

    Why a copy: the python backend looks for the stub next to ``libtriton_python.so``, and the wheel's
    tree should stay untouched. The copy is made once and reused (it is complete when the stub is there).
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = install.stubs_dir / version / STUB_NAME
    if not stub.is_file():
        raise EngineUnavailable(f"nvidia-pytriton has no python backend stub for Python {version} ({stub})")
    target = Path(workdir).resolve() / "backends"
    target_stub = target / "python" / STUB_NAME
    if not (target_stub.is_file() and target_stub.stat().st_size == stub.stat().st_size):
        shutil.copytree(install.backends_dir, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        partial = target_stub.with_suffix(".partial")
        shutil.copy2(stub, partial)
        partial.chmod(0o755)
        partial.replace(target_stub)  # atomic: a half-copied stub is never mistaken for a finished copy
    check_stub(target_stub, server_environment(install))
    return target


def check_stub(stub: Path, env: Mapping[str, str]) -> None:
    """Run the stub without arguments: it must get past the dynamic loader (it then exits 1 complaining
    "Expected 9 arguments").

    Why: a missing ``libpython3.X.so.1.0`` or wheel library otherwise shows up only as an obscure model
    load failure deep in the server log.
    """
    result = subprocess.run([str(stub)], env=dict(env), stdin=subprocess.DEVNULL, capture_output=True,
                            timeout=30, check=False)
    output = (result.stdout + result.stderr).decode(errors="replace")
    if result.returncode in (126, 127) or result.returncode < 0 or "error while loading" in output:
        raise EngineUnavailable(f"python backend stub {stub} does not run here "
                                f"(exit {result.returncode}): {output.strip()[-500:]}")


def server_environment(install: TritonInstall, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for the server and its python stubs (see the module docstring for why).

    ``LD_LIBRARY_PATH``: the wheel's shared libraries, then this interpreter's libpython directory.
    ``PATH``: this interpreter's ``bin`` (or ``install.python``'s) first, so the stub's embedded Python adopts
    that environment.
    """
    env = dict(os.environ if base is None else base)
    libdirs = [str(install.libs_dir)]
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and sysconfig.get_config_var("LIBDIR"):
        libdirs.append(str(sysconfig.get_config_var("LIBDIR")))
    env["LD_LIBRARY_PATH"] = _prepend(":".join(libdirs), env.get("LD_LIBRARY_PATH"))
    env["PATH"] = _prepend(str(Path(install.python or sys.executable).parent), env.get("PATH"))
    return env


def _prepend(item: str, value: str | None) -> str:
    """Put ``item`` first in a ``:``-separated search path."""
    return f"{item}:{value}" if value else item


def free_ports(count: int) -> list[int]:
    """Ask the kernel for ``count`` distinct free loopback ports (all held open until all are chosen)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class LocalTritonServer:
    """A tritonserver process on loopback ports, for ``modelfleet serve``, tests and benchmarks.

    The process runs in its own session (process group) so that :meth:`stop` also ends the python backend
    stubs it forks, and gets SIGTERM if this process dies without stopping it
    (:func:`modelfleet.engines.process.die_with_parent`). Leaving the ``with`` block always stops it.
    ``backends``: an already prepared backends directory (default: one prepared under ``workdir``).
    ``expected_models``: readiness also waits for these models.
    """

    PORT_ATTEMPTS = 3  # free ports are chosen before tritonserver binds them: another process may win
    DRAIN_POLL_S = 0.2  # while stopping: how often idle client connections are looked for

    def __init__(self, model_repository: Path | str, extra_args: Sequence[str] = (), *,
                 workdir: Path | str | None = None, install: TritonInstall | None = None,
                 startup_timeout: float = 120.0, stop_timeout: float = 30.0,
                 env: Mapping[str, str] | None = None, backends: Path | None = None,
                 expected_models: Sequence[str] = ()) -> None:
        self.model_repository = Path(model_repository).resolve()
        self.extra_args = list(extra_args)
        self.install = install or find_tritonserver()
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="tritonserver-")).resolve()
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._base_env = env
        self.backends = Path(backends).resolve() if backends else None
        self.expected_models = tuple(expected_models)
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.log_path = self.workdir / "tritonserver.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.closed_connections = 0  # idle client connections closed while stopping (see stop)

    @property
    def http_url(self) -> str:
        """Base URL of the KServe v2 HTTP API (``/v2/...``)."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """``host:port`` for ``tritonclient.grpc.InferenceServerClient(url=...)``."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        """Prometheus endpoint."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def ports(self) -> tuple[int, int, int]:
        return self.http_port, self.grpc_port, self.metrics_port

    def command(self, backends: Path) -> list[str]:
        """The full command line; our flags come before ``extra_args`` so callers can override them."""
        return [str(self.install.binary), f"--model-repository={self.model_repository}",
                f"--backend-directory={backends}", f"--cache-directory={self.install.caches_dir}",
                "--http-address=127.0.0.1", f"--http-port={self.http_port}",
                "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc_port}",
                "--metrics-address=127.0.0.1", f"--metrics-port={self.metrics_port}",
                "--allow-metrics=true", "--allow-cpu-metrics=true", "--allow-gpu-metrics=false",
                *self.extra_args]

    def start(self) -> LocalTritonServer:
        """Start the process and block until it serves (see :meth:`serving`), or raise with the log tail.

        A port taken by someone else meanwhile is retried on new ports. On failure the process group is
        stopped; the work directory (with the log) is kept for inspection.
        """
        if self.process is not None:
            raise RuntimeError("server already started")
        self.workdir.mkdir(parents=True, exist_ok=True)
        backends = self.backends or prepare_backends(self.install, self.workdir)
        for attempt in range(1, self.PORT_ATTEMPTS + 1):
            self._launch(backends)
            try:
                self._wait_ready()
                return self
            except PortTaken:
                self.stop()
                if attempt == self.PORT_ATTEMPTS:
                    raise
                self.process = None
                self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _launch(self, backends: Path) -> None:
        env = server_environment(self.install, self._base_env)
        if traces(self.extra_args):  # tritonserver 2.51's tracer frees a mutex before unlocking it
            env = trace_safe_environment(env)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command(backends), stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, cwd=self.workdir, env=env,
                                            start_new_session=True, preexec_fn=die_with_parent())

    def _wait_ready(self) -> None:
        """Poll until :meth:`serving`; fail fast if the process exits, with the log tail on timeout."""
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._exited(0.0):
                tail = self.log_tail()
                if "already in use" in tail:
                    raise PortTaken(f"tritonserver could not bind its ports\n{tail}")
                raise EngineStartError(f"tritonserver exited during startup: {self.death_report()}")
            if self.serving():
                return
            time.sleep(0.1)
        raise EngineStartError(f"tritonserver not ready after {self.startup_timeout:g}s\n{self.log_tail()}")

    def serving(self) -> bool:
        """Ready, with every expected model ready, and it is *our* process answering.

        Why the last check: the ports are chosen before tritonserver binds them, so a readiness probe can
        reach another server that took a port meanwhile (ours then exits: "already in use"). Only a
        listening socket held by our process proves the endpoints are ours.
        """
        if self.process is None or not http_ok(self.http_url + "/v2/health/ready"):
            return False
        if not all(http_ok(f"{self.http_url}/v2/models/{name}/ready") for name in self.expected_models):
            return False
        return all(listens_on(self.process.pid, port) for port in self.ports) and not self._exited(0.0)

    def running(self) -> bool:
        """Started and not exited (the process itself; whether it answers is :meth:`serving`)."""
        return self.process is not None and self.process.returncode is None and not self._exited(0.0)

    def _exited(self, timeout: float) -> bool:
        """Has the server exited (waiting up to ``timeout``)? The zombie is not reaped, so its process
        group id cannot be reused before :meth:`stop` has swept the group."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while True:
            exited = self.exit_status() is not None
            if exited or time.monotonic() >= deadline:
                return exited
            time.sleep(0.05)

    def exit_status(self) -> ExitStatus | None:
        """How the server ended (exit code or signal, core dump), before or after :meth:`stop`; None while
        it runs or before it started."""
        if self.process is None:
            return None
        if self.process.returncode is not None:
            return from_returncode(self.process.pid, self.process.returncode)
        return peek_exit(self.process.pid)

    def death_report(self) -> str:
        """How the server died, for an error message: its exit status, what the kernel logged about it
        (when ``dmesg`` is readable), tritonserver's own crash report (signal and backtrace) or its log tail."""
        status = self.exit_status()
        if status is None:
            return "tritonserver is still running"
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            text = ""
        return death_report("tritonserver", status, text, self.log_tail(), kernel_messages(status.pid))

    def stop(self, notify: Callable[[str], None] | None = None) -> int | None:
        """SIGTERM the group, wait ``stop_timeout``, then SIGKILL; always sweep leftover stubs. Idempotent.

        While it stops, client connections that carry no request are closed (see
        :mod:`modelfleet.engines.connections`: the server would wait its whole exit timeout for them and then
        exit 1); :attr:`closed_connections` counts them. Where they cannot be closed, ``notify`` is told what
        the server waits for, so a slow stop is never silent."""
        if self.process is None or self.process.returncode is not None:
            return None if self.process is None else self.process.returncode
        pgid = self.process.pid  # start_new_session: the server leads its own group
        signal_group(pgid, signal.SIGTERM)
        if not self._drain(self.stop_timeout, notify or (lambda message: None)):
            signal_group(pgid, signal.SIGKILL)
            self._exited(10.0)
        signal_group(pgid, signal.SIGKILL)  # stubs that outlived the server
        return self.process.wait()

    def _drain(self, timeout: float, notify: Callable[[str], None]) -> bool:
        """Wait up to ``timeout`` for the stopping server to exit, closing the idle connections it waits for."""
        assert self.process is not None
        deadline, closable = time.monotonic() + timeout, True
        while not self._exited(self.DRAIN_POLL_S):
            if time.monotonic() >= deadline:
                return False
            if not closable:
                continue
            try:
                self.closed_connections += close_idle_connections(self.process.pid, self.http_port)
            except CannotClose as exc:
                closable, waiting = False, len(connected_sockets(self.process.pid, self.http_port))
                if waiting:
                    notify(f"tritonserver waits up to {timeout:g} s for {waiting} open HTTP client connection(s) "
                           f"to close (keep-alive clients; they cannot be closed from here: {exc.strerror})")
        return True

    def log_tail(self, lines: int = 25) -> str:
        """Error lines plus the last lines of the log, without the option tables (they hide the cause)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        kept = [line for line in text.splitlines() if line.strip() and not line.startswith(("|", "+"))]
        errors = [line for line in kept[:-lines] if re.match(r"E\d{4} ", line)][-10:]
        return "\n".join(errors + kept[-lines:])

    def __enter__(self) -> LocalTritonServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
