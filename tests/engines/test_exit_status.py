"""How an engine process ended, read from real child processes (no engine needed, Linux)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from modelfleet.engines.exit_status import (
    ExitStatus,
    crash_lines,
    death_report,
    from_returncode,
    kernel_messages,
    peek_exit,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="waitid, dmesg")

TRITON_CRASH_LOG = """\
I1125 01:31:59.387611 19439 http_server.cc:362] "Started Metrics Service at 127.0.0.1:47595"
Signal (11) received.
 0# 0x00005652D46A752D in /x/tritonserver
 1# 0x00007FA77165A050 in /lib/x86_64-linux-gnu/libc.so.6
 2# 0x00007FA7716A3E06 in /lib/x86_64-linux-gnu/libc.so.6
 3# 0x00005652D48308FB in /x/tritonserver
"""


def exited(process: subprocess.Popen, seconds: float = 10.0) -> ExitStatus:
    deadline = time.monotonic() + seconds
    while (status := peek_exit(process.pid)) is None:
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.02)
    return status


def test_an_exit_code_is_read_without_reaping_the_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    status = exited(child)
    assert status == ExitStatus(child.pid, code=3) and status.describe() == "exited with code 3"
    assert peek_exit(child.pid) == status  # still a zombie: read twice, and the pid is not reused meanwhile
    assert child.wait() == 3


def test_a_signal_names_itself_and_matches_the_reaped_returncode() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"])
    status = exited(child)
    assert status.signal == signal.SIGILL and status.code is None
    assert status.describe().startswith("killed by SIGILL (signal 4)")
    assert from_returncode(child.pid, child.wait()) == ExitStatus(child.pid, signal=signal.SIGILL)


def test_a_running_process_has_no_exit_status() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert peek_exit(child.pid) is None
    finally:
        child.kill()
        child.wait()


def test_kernel_messages_keep_the_lines_about_that_process_only() -> None:
    dmesg = ("[ 1168.97] traps: tritonserver[22908] trap invalid opcode ip:7f35a39e0e06 sp:7ffd29c5b5a8 error:0 "
             "in libc.so.6[85e06,7f35a3981000+156000]\n"
             "[ 1169.00] traps: python[229081] general protection fault ip:1\n"
             "[ 1170.00] Out of memory: Killed process 22908 (tritonserver) total-vm:1kB\n")

    def run(*args, **kwargs):
        return subprocess.CompletedProcess(args, 0, stdout=dmesg, stderr="")

    lines = kernel_messages(22908, run=run)
    assert lines == [dmesg.splitlines()[0].strip(), dmesg.splitlines()[2].strip()]


def test_an_unreadable_kernel_log_is_said_to_be_unreadable() -> None:
    def refused(*args, **kwargs):
        return subprocess.CompletedProcess(args, 1, stdout="", stderr="dmesg: read kernel buffer failed")

    assert kernel_messages(1, run=refused) is None
    report = death_report("tritonserver", ExitStatus(7, signal=11), TRITON_CRASH_LOG, "tail", None)
    assert "kernel log: not readable here" in report


def test_the_report_carries_the_engines_own_crash_report_over_the_log_tail() -> None:
    assert crash_lines(TRITON_CRASH_LOG)[0] == "Signal (11) received."
    assert len(crash_lines(TRITON_CRASH_LOG)) == 5
    report = death_report("tritonserver", ExitStatus(7, signal=11, core_dumped=True), TRITON_CRASH_LOG,
                          "TAIL", ["traps: tritonserver[7] general protection fault"])
    assert report.startswith("tritonserver (pid 7) killed by SIGSEGV (signal 11), core dumped")
    assert "general protection fault" in report and "3# 0x00005652D48308FB" in report and "TAIL" not in report
    assert "the end of its log:\nTAIL" in death_report("x", ExitStatus(7, code=1), "no crash here", "TAIL", [])
