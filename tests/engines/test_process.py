"""Engine process lifetime helpers on real processes and sockets (no engine needed, Linux)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from modelfleet.engines.process import group_pids, listens_on
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, uses prctl")

# A parent that starts `sleep` in a session of its own (as engines are started), prints its pid, then waits.
PARENT = """
import subprocess, sys, time
from modelfleet.engines.process import die_with_parent
child = subprocess.Popen(["sleep", "60"], start_new_session=True, preexec_fn=die_with_parent())
print(child.pid, flush=True)
time.sleep(60)
"""


def gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while group_pids(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not group_pids(pid)


def test_a_child_in_its_own_session_dies_with_its_killed_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert group_pids(child) == [child]
        parent.kill()  # no chance to clean up
        parent.wait(10)
        assert gone(child), "the child outlived its SIGKILLed parent"
    finally:
        parent.kill()
        if child:
            try:
                os.killpg(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_group_pids_lists_live_members_only() -> None:
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert group_pids(sleeper.pid) == [sleeper.pid]
        assert os.getpid() not in group_pids(sleeper.pid)
    finally:
        sleeper.kill()
    time.sleep(0.1)  # a zombie (killed, not yet reaped) is not a live member
    assert group_pids(sleeper.pid) == []
    sleeper.wait()


def test_listens_on_names_the_process_holding_the_listening_socket() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        assert not listens_on(os.getpid(), port)  # bound, not listening
        listener.listen()
        assert listens_on(os.getpid(), port)
        assert not listens_on(os.getppid(), port)
    assert not listens_on(os.getpid(), port)
