"""How an engine process ended: exit code or signal, core dump, and what the kernel logged about it.

Why: a server that dies under load must say how, or the cause cannot be found. Engines are kept as
unreaped zombies until they are stopped (so that their process group id is not reused before the group
is swept, see :mod:`modelfleet.engines.tritonserver`), so ``Popen.returncode`` stays ``None`` after a
crash; ``waitid(..., WNOWAIT)`` reads the status without reaping. Signals an engine handles itself do not
reach the kernel log (tritonserver catches SIGSEGV and SIGABRT, prints "Signal (11) received." and a
backtrace to its own log, then dies of the signal); the others do (an invalid opcode is SIGILL,
"traps: NAME[PID] trap invalid opcode ... in LIB"), as do OOM kills. Linux only.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class ExitStatus:
    """An exited process: ``code`` when it exited, ``signal`` when a signal ended it."""

    pid: int
    code: int | None = None
    signal: int | None = None
    core_dumped: bool = False

    def describe(self) -> str:
        if self.signal is None:
            return f"exited with code {self.code}"
        try:
            name = signal.Signals(self.signal).name
        except ValueError:
            name = f"signal {self.signal}"
        return f"killed by {name} (signal {self.signal}){', core dumped' if self.core_dumped else ''}"


def peek_exit(pid: int) -> ExitStatus | None:
    """The exit status of child ``pid`` if it has exited, without reaping it; None while it runs."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if info is None:
        return None
    return from_waitid(pid, info.si_code, info.si_status)


def from_waitid(pid: int, si_code: int, si_status: int) -> ExitStatus:
    """CLD_EXITED carries an exit code; CLD_KILLED and CLD_DUMPED a signal number."""
    if si_code == os.CLD_EXITED:
        return ExitStatus(pid, code=si_status)
    return ExitStatus(pid, signal=si_status, core_dumped=si_code == os.CLD_DUMPED)


def from_returncode(pid: int, returncode: int) -> ExitStatus:
    """``Popen.returncode`` after reaping: negative means killed by that signal (core dumps are not known)."""
    return ExitStatus(pid, signal=-returncode) if returncode < 0 else ExitStatus(pid, code=returncode)


def kernel_messages(pid: int, run=subprocess.run) -> list[str] | None:
    """Kernel log lines about process ``pid`` ("NAME[PID]" traps and segfaults, "process PID (NAME)" OOM
    kills); None when the kernel log cannot be read here (``dmesg`` missing or not permitted)."""
    try:
        result = run(["dmesg"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    mention = re.compile(rf"\[{pid}\]|\bprocess {pid}\b|\bpid[ =]{pid}\b")
    return [line.strip() for line in result.stdout.splitlines() if mention.search(line)]


def crash_lines(log_text: str) -> list[str]:
    """tritonserver's own crash report in its log: "Signal (N) received." and the backtrace after it."""
    lines = log_text.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"Signal \(\d+\) received\.", line)]
    if not starts:
        return []
    return [line for line in lines[starts[0]:starts[0] + 40] if line.strip()]


def death_report(name: str, status: ExitStatus, log_text: str, log_tail: str,
                 kernel: list[str] | None) -> str:
    """One text naming how ``name`` died: status, the kernel's lines, the engine's own crash report, log tail."""
    parts = [f"{name} (pid {status.pid}) {status.describe()}"]
    if kernel is None:
        parts.append("kernel log: not readable here (dmesg)")
    else:
        parts.append("kernel log: " + ("\n  ".join(["", *kernel]) if kernel else "nothing about this process"))
    crash = crash_lines(log_text)
    if crash:
        parts.append(f"{name}'s crash report:\n" + "\n".join(crash))
    else:
        parts.append("the end of its log:\n" + log_tail)
    return "\n".join(parts)
