"""``modelfleet serve``'s supervision and per-run directories, without a tritonserver.

The supervised "server" is a stand-in object over a real local HTTP server whose liveness answers are
scripted, so a slow or failing probe can be produced on purpose.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from modelfleet.commands.serve import LIVENESS_FAILURES, run_directory, supervise


@dataclass
class Script:
    """Liveness answers in order (True: 200 at once, False: too slow for the probe), then ``then``."""

    answers: list[bool]
    then: bool = True
    probes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self) -> bool:
        with self.lock:
            self.probes += 1
            return self.answers.pop(0) if self.answers else self.then


@pytest.fixture
def scripted() -> Iterator[tuple[str, Script]]:
    script = Script([])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            if not script.next():
                time.sleep(0.3)  # longer than the probe's timeout below
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        httpd.shutdown()
        httpd.server_close()


@dataclass
class FakeServer:
    """What supervise() reads of a LocalTritonServer: its URL and whether its process still runs."""

    http_url: str
    lives_for: int  # calls of running() that answer True
    calls: int = 0

    def running(self) -> bool:
        self.calls += 1
        return self.calls <= self.lives_for


def test_slow_probes_short_of_the_limit_do_not_stop_a_live_server(scripted) -> None:
    url, script = scripted
    script.answers = [False] * (LIVENESS_FAILURES - 1) + [True] + [False] * (LIVENESS_FAILURES - 1)
    server = FakeServer(url, lives_for=2 * LIVENESS_FAILURES + 2)
    assert supervise(server, interval_s=0.01, probe_timeout_s=0.1) == "exited"  # ran until its process ended
    assert script.probes == 2 * LIVENESS_FAILURES + 2


def test_consecutive_failed_probes_end_supervision(scripted) -> None:
    url, script = scripted
    script.then = False
    server = FakeServer(url, lives_for=100)
    assert supervise(server, interval_s=0.01, probe_timeout_s=0.1) == (
        f"did not answer {LIVENESS_FAILURES} liveness probes in a row")
    assert script.probes == LIVENESS_FAILURES


def test_a_dead_process_ends_supervision_without_probing(scripted) -> None:
    url, script = scripted
    assert supervise(FakeServer(url, lives_for=0), interval_s=0.01) == "exited"
    assert script.probes == 0


def test_each_run_gets_its_own_directory_and_stale_ones_are_removed(tmp_path: Path) -> None:
    """A run's directory is stale when nobody holds its lock, whatever process id its name carries: a live run in
    another PID namespace (its id means nothing here) keeps its directory; a killed run's goes."""
    import fcntl

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"run-{dead.pid}-old"
    (stale / "repository").mkdir(parents=True)
    (stale / ".lock").touch()  # a killed run: its lock died with it
    elsewhere = tmp_path / f"run-{dead.pid}-other-namespace"
    (elsewhere / "repository").mkdir(parents=True)
    held = os.open(elsewhere / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # a live run whose pid this namespace cannot see
    older = tmp_path / f"run-{dead.pid}-older-release"  # no lock file: not known to be stale
    (older / "repository").mkdir(parents=True)
    try:
        with run_directory(tmp_path) as first, run_directory(tmp_path) as second:
            assert first != second and first.name.startswith(f"run-{os.getpid()}-")
            (first / "repository").mkdir()
            (first / "tritonserver.log").write_text("log")
            assert not stale.exists() and (elsewhere / "repository").is_dir() and (older / "repository").is_dir()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, second.name, elsewhere.name, older.name])
    finally:
        os.close(held)
    assert not (first / "repository").exists() and (first / "tritonserver.log").is_file()  # the log stays
