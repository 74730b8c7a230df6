"""Engine processes that never outlive modelfleet: own process group, a parent-death signal, a group sweep.

Why all three: an engine runs in its own session (process group) so that stopping it also ends what it
forks (tritonserver's python stubs, vLLM's engine core), and a Ctrl-C in the terminal reaches modelfleet
first, which then stops the engine in order. But a session of its own also means that nothing stops the
engine when modelfleet itself dies without cleaning up (SIGKILL, an OOM kill, a crash in C code): the
engine would be orphaned, holding its ports and memory. ``PR_SET_PDEATHSIG`` closes that gap: the kernel
sends the engine a signal when its parent dies. SIGTERM, not SIGKILL, so the engine shuts down in order
and stops its own children: a SIGKILLed tritonserver leaves its python stubs running (measured here).

Linux only (prctl); elsewhere :func:`die_with_parent` does nothing. The signal fires when the *thread*
that started the engine exits, so start engines from a thread that lives as long as they should (the
main thread, in modelfleet and in the tests).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when this process dies.

    Checks the parent after arming the signal: if the parent died between ``fork`` and ``prctl``, the
    signal would never come, so the child sends it to itself.
    """
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()

    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal a process group; a group that is already gone is fine."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_pids(pgid: int, proc: Path = Path("/proc")) -> list[int]:
    """Live (non-zombie) processes of a process group, from ``/proc/<pid>/stat`` (Linux)."""
    pids = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return sorted(pids)


def listens_on(pid: int, port: int, proc: Path = Path("/proc")) -> bool:
    """Does process ``pid`` hold a listening TCP socket on ``port`` (any address, IPv4 or IPv6)?

    Why: proof that a local endpoint belongs to the engine we started, not to another process that bound
    the port first. Reads ``/proc/net/tcp{,6}`` (listening sockets' inodes) and ``/proc/<pid>/fd``.
    """
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: TCP_LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    try:
        descriptors = list((proc / str(pid) / "fd").iterdir())
    except OSError:
        return False
    return any(_readlink(fd) in inodes for fd in descriptors)


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""
