"""A REAL tritonserver that dies says how (signal, its own crash report); a tracing one runs with the
allocator setting that keeps 2.51's tracer from crashing it (see modelfleet.engines.trace)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.engines.conftest import engine_import, require_tritonserver  # noqa: E402

require_tritonserver()
np = engine_import("triton", "numpy")

from modelfleet.engines.trace import TRACE_SAFE_TUNABLE, trace_args, trace_files  # noqa: E402
from modelfleet.engines.tritonserver import LocalTritonServer  # noqa: E402
from tests.engines.test_tritonserver_smoke import DOUBLER, SERVER_ARGS, infer, write_config  # noqa: E402

pytestmark = pytest.mark.engine


def doubler_repository(root: Path) -> Path:
    model_dir = root / "repo" / "doubler"
    write_config(model_dir, '{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }',
                 '{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }')
    (model_dir / "1").mkdir()
    (model_dir / "1" / "model.py").write_text(DOUBLER)
    return root / "repo"


def environment_of(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


def test_a_server_killed_by_a_signal_reports_the_signal_and_its_backtrace(tmp_path: Path) -> None:
    with LocalTritonServer(doubler_repository(tmp_path), SERVER_ARGS, workdir=tmp_path / "work") as server:
        assert server.exit_status() is None and server.process is not None
        os.kill(server.process.pid, signal.SIGSEGV)  # what a crash delivers; tritonserver handles it itself
        deadline = time.monotonic() + 20
        while server.running():
            assert time.monotonic() < deadline, "tritonserver survived SIGSEGV"
            time.sleep(0.05)
        status = server.exit_status()
        assert status is not None and status.signal == signal.SIGSEGV, status
        report = server.death_report()
        assert report.startswith(f"tritonserver (pid {server.process.pid}) killed by SIGSEGV (signal 11)")
        assert "Signal (11) received." in report and "0# " in report  # its handler's backtrace
        assert "kernel log:" in report
    assert server.exit_status() == status  # the same after stop() reaped it


def test_only_a_tracing_server_gets_the_trace_safe_allocator_setting(tmp_path: Path) -> None:
    repository = doubler_repository(tmp_path)
    traced = [*SERVER_ARGS, *trace_args(tmp_path / "trace.json")]
    for args, expected in ((SERVER_ARGS, None), (traced, TRACE_SAFE_TUNABLE)):
        with LocalTritonServer(repository, args, workdir=tmp_path / f"work-{expected is None}") as server:
            assert server.process is not None
            assert environment_of(server.process.pid).get("GLIBC_TUNABLES") == expected
            x = np.ones((1, 4), dtype=np.float32)
            np.testing.assert_array_equal(infer(server, "doubler", x), x * 2)
    assert trace_files(tmp_path / "trace.json")
