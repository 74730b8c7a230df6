"""Putting a staged render in the place of the previous one, so that ``--out`` is always whole.

On Linux the staged directory and ``--out`` trade places in one step (``renameat2`` with RENAME_EXCHANGE,
through ctypes; ext4, xfs, btrfs and tmpfs support it): at every instant ``--out`` is the previous render or
the new one, whatever kills the process. The previous render then sits under the staging name and is deleted;
a kill before that leaves it to the next render, which removes the leftovers of dead processes.

Elsewhere (another OS, or a filesystem that refuses the exchange, e.g. some network filesystems) the swap is
two renames: ``--out`` to a retired name, then the staging to ``--out``. A kill between them leaves no
``--out`` for a moment; the next render completes that swap before anything else (:func:`recover`): the staged
render, complete and synced before the first rename, is moved into place (or, if it is gone, the retired one
back). Every name made here carries the writer's process id and the output's name, so that recovery and
cleanup know whose leftovers they are and never touch a render still running.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import sys

STAGING_PREFIX = ".modelfleet-render-"
RETIRED_PREFIX = ".modelfleet-old-"
AT_FDCWD = -100  # <fcntl.h>
RENAME_EXCHANGE = 2  # <linux/fs.h>
# the filesystem or kernel cannot exchange: fall back to two renames
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}


class ExchangeUnsupported(Exception):
    """This system cannot swap two directories in one step."""


def leftover_name(prefix: str, name: str) -> str:
    """``<prefix><pid>-<random>-<name>``: whose it is, and for which output."""
    return f"{prefix}{os.getpid()}-{secrets.token_hex(4)}-{name}"


def owner(entry: str) -> tuple[str, int | None, str] | None:
    """(prefix, pid, output name) of a name made by :func:`leftover_name`; pid None for an older release's
    names (``.modelfleet-old-x1y2z3``); None for anything else."""
    prefix = next((p for p in (STAGING_PREFIX, RETIRED_PREFIX) if entry.startswith(p)), None)
    if prefix is None:
        return None
    pid, _, rest = entry[len(prefix):].partition("-")
    _, _, name = rest.partition("-")
    return prefix, (int(pid) if pid.isdigit() and rest else None), name


def swap_in(staging: str, target: str) -> None:
    """Replace ``target`` (a directory, or nothing) with ``staging``; the previous content is deleted."""
    if not os.path.lexists(target):
        move_in(staging, target)
        return
    try:
        exchange(staging, target)
    except ExchangeUnsupported:
        retired = retire(target)
        try:
            move_in(staging, target)
        except BaseException:
            os.rename(retired, target)
            raise
        discard(retired)
        return
    discard(staging)  # it holds the previous render now


def exchange(first: str, second: str) -> None:
    """Swap two paths atomically (Linux 3.15+, glibc 2.28+); ExchangeUnsupported where that is not possible."""
    renameat2 = getattr(_libc(), "renameat2", None) if sys.platform.startswith("linux") else None
    if renameat2 is None:
        raise ExchangeUnsupported("renameat2 is not available")
    if renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0:
        return
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        raise ExchangeUnsupported(os.strerror(code))
    raise OSError(code, os.strerror(code), second)


def no_exchange(first: str, second: str) -> None:
    """What :func:`exchange` does where the system cannot (the fallback's tests put it in its place)."""
    raise ExchangeUnsupported("exchange disabled")


def retire(target: str) -> str:
    retired = os.path.join(os.path.dirname(target), leftover_name(RETIRED_PREFIX, os.path.basename(target)))
    os.rename(target, retired)
    return retired


def move_in(staging: str, target: str) -> None:
    os.rename(staging, target)


def discard(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def recover(parent: str, name: str) -> str | None:
    """Complete a two-rename swap of ``parent/name`` that a dead render left half done; what was done."""
    target = os.path.join(parent, name)
    if os.path.lexists(target):
        return None
    dead = {entry: found for entry in sorted(os.listdir(parent))
            if (found := owner(entry)) and found[2] == name and found[1] and not running(found[1])}
    for retired, (prefix, pid, _) in dead.items():
        if prefix != RETIRED_PREFIX:
            continue
        staged = [e for e, (p, q, _) in dead.items() if p == STAGING_PREFIX and q == pid]
        os.rename(os.path.join(parent, staged[0] if staged else retired), target)
        return f"completed the swap a killed render (pid {pid}) left half done"
    return None


def remove_stale(parent: str) -> list[str]:
    """Remove staging and retired directories a killed render left in ``parent``; the names removed.

    One whose process is still running is left alone (two renders into one parent at once). Names without a
    process id (older releases) are always stale."""
    removed = []
    for entry in sorted(os.listdir(parent)):
        found = owner(entry)
        path = os.path.join(parent, entry)
        if found is None or not os.path.isdir(path) or os.path.islink(path):
            continue
        if found[1] is not None and running(found[1]):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(entry)
    return removed


def running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
