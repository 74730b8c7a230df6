"""One render at a time per output directory: a lock file beside it, held with ``flock``, that also lists the
temporary directories its holders created.

Why: two renders into one ``--out`` used to collide halfway through the swap ("No such file or directory").
The second one now stops before touching anything and says who holds the directory: the lock file's first line
is the holder's process id, command line and start time. ``flock`` locks die with their process, so a render
that was killed never blocks the next one; the file itself is removed by whoever held it last.

The lock file is also the output's ledger: before a render creates a temporary name beside the output (its
staging directory, the name the previous render is retired under), it appends ``owns <names>`` and syncs the
file. The next holder of the same lock inherits those lines: they, and only they, are the leftovers it may
complete or delete. A directory that merely looks like a leftover (another output's, a render in another PID
namespace sharing the directory, an older release's) is never touched: a process id says nothing across PID
namespaces, a ledger line written under this output's lock does.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import Issue, OutputError

LOCK_PREFIX = ".modelfleet-lock-"
OWNS = "owns "


@dataclass
class Ledger:
    """The names beside the output that its renders created: ``inherited`` from earlier holders of the lock
    (each tuple one render's names; those renders are gone, since the lock is ours), and this one's own."""

    handle: int
    parent: str
    inherited: tuple[tuple[str, ...], ...]
    claimed: list[str] = field(default_factory=list)

    def claim(self, *names: str) -> None:
        """Record ``names`` (plain names in the output's parent) before creating them."""
        os.write(self.handle, _owns(names))
        os.fsync(self.handle)
        self.claimed += names

    def settled(self) -> bool:
        """No name this lock's holders created is left beside the output."""
        names = [*self.claimed, *(n for run in self.inherited for n in run)]
        return not any(os.path.lexists(os.path.join(self.parent, n)) for n in names)


@contextmanager
def output_lock(out_dir: str, target: str) -> Iterator[Ledger]:
    """Hold the lock of ``target`` (a real path) for the block; ``out_dir`` is how the user named it."""
    parent = os.path.dirname(target)
    path = os.path.join(parent, LOCK_PREFIX + os.path.basename(target))
    handle, inherited = _acquire(path, out_dir)
    ledger = Ledger(handle=handle, parent=parent, inherited=inherited)
    try:
        yield ledger
    finally:
        try:
            if ledger.settled():  # else its lines stay for the next holder
                os.unlink(path)  # while still holding it: a waiter that opened this file then sees it is stale
        except OSError:
            pass
        os.close(handle)


def _owns(names: tuple[str, ...]) -> bytes:
    return (OWNS + " ".join(names) + "\n").encode()


def _acquire(path: str, out_dir: str) -> tuple[int, tuple[tuple[str, ...], ...]]:
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(handle)
            os.close(handle)
            raise OutputError([Issue(out_dir, 0, 0, "", f"another render is writing it: {holder or 'starting'}",
                                     "wait for it to finish, or stop it; nothing was changed")]) from None
        except BaseException:
            os.close(handle)
            raise
        if _same_file(handle, path):
            return handle, _take_over(handle, path)
        os.close(handle)  # its holder removed it between our open and our lock: take the new one


def _take_over(handle: int, path: str) -> tuple[tuple[str, ...], ...]:
    """Write the holder line, keeping the inherited lines until they are dealt with; the inherited runs."""
    inherited = _inherited(handle)
    try:
        os.ftruncate(handle, 0)
        os.write(handle, _holder().encode() + b"\n" + b"".join(_owns(run) for run in inherited))
        os.fsync(handle)
    except BaseException:
        if not inherited:
            os.unlink(path)
        os.close(handle)
        raise
    return inherited


def _holder() -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    command = shlex.join(["modelfleet", *sys.argv[1:]]) if sys.argv and sys.argv[0] != "-c" else shlex.join(sys.argv)
    return f"pid {os.getpid()} ({command}), since {started}"


def _read(handle: int) -> str:
    """The holder line."""
    try:
        return (os.pread(handle, 4096, 0).decode(errors="replace").splitlines() or [""])[0].strip()
    except OSError:
        return ""


def _inherited(handle: int) -> tuple[tuple[str, ...], ...]:
    """The ``owns`` lines an earlier holder left (it was killed, or could not remove them)."""
    size = os.fstat(handle).st_size
    text = os.pread(handle, min(size, 1 << 20), 0).decode(errors="replace") if size else ""
    runs = (tuple(n for n in line[len(OWNS):].split() if _plain(n)) for line in text.splitlines()
            if line.startswith(OWNS))
    return tuple(run for run in runs if run)


def _plain(name: str) -> bool:
    """A name in the output's parent, nothing a ledger someone edited could point elsewhere with."""
    return "/" not in name and name not in (".", "..")


def _same_file(handle: int, path: str) -> bool:
    try:
        held, named = os.fstat(handle), os.stat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)
