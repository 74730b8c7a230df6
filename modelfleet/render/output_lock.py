"""One render at a time per output directory: a lock file beside it, held with ``flock``.

Why: two renders into one ``--out`` used to collide halfway through the swap ("No such file or directory").
The second one now stops before touching anything and says who holds the directory: the lock file carries
the holder's process id, command line and start time. ``flock`` locks die with their process, so a render
that was killed never blocks the next one; the file itself is removed by whoever held it last.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import Issue, OutputError

LOCK_PREFIX = ".modelfleet-lock-"


@contextmanager
def output_lock(out_dir: str, target: str) -> Iterator[None]:
    """Hold the lock of ``target`` (a real path) for the block; ``out_dir`` is how the user named it."""
    path = os.path.join(os.path.dirname(target), LOCK_PREFIX + os.path.basename(target))
    handle = _acquire(path, out_dir)
    try:
        yield
    finally:
        try:
            os.unlink(path)  # while still holding it: a waiter that opened this file then sees it is stale
        except OSError:
            pass
        os.close(handle)


def _acquire(path: str, out_dir: str) -> int:
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
            os.ftruncate(handle, 0)
            os.write(handle, _holder().encode())
            return handle
        os.close(handle)  # its holder removed it between our open and our lock: take the new one


def _holder() -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    command = shlex.join(["modelfleet", *sys.argv[1:]]) if sys.argv and sys.argv[0] != "-c" else shlex.join(sys.argv)
    return f"pid {os.getpid()} ({command}), since {started}"


def _read(handle: int) -> str:
    try:
        return os.pread(handle, 4096, 0).decode(errors="replace").strip()
    except OSError:
        return ""


def _same_file(handle: int, path: str) -> bool:
    try:
        held, named = os.fstat(handle), os.stat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)
