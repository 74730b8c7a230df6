"""Putting a staged render in the place of the previous one, so that ``--out`` is always whole.

On Linux the staged directory and ``--out`` trade places in one step (``renameat2`` with RENAME_EXCHANGE,
through ctypes; ext4, xfs, btrfs and tmpfs support it): at every instant ``--out`` is the previous render or
the new one, whatever kills the process. The previous render then sits under the staging name and is deleted;
a kill before that leaves it to the next render, which removes the leftovers of dead processes.

Elsewhere (another OS, or a filesystem that refuses the exchange, e.g. some network filesystems) the swap is
two renames: ``--out`` to a retired name, then the staging to ``--out``. A kill between them leaves no
``--out`` for a moment; the next render completes that swap before anything else (:func:`recover`): the staged
render, complete and synced before the first rename, is moved into place (or, if it is gone, the retired one
back). Both names are listed in the output's lock file before either is created (output_lock.py), and
recovery and cleanup act only on names listed there: never on a directory by the look of its name.
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


def leftover_names(name: str) -> tuple[str, str]:
    """The staging and retired names of one render of output ``name``: ``<prefix><pid>-<random>-<name>``."""
    run = f"{os.getpid()}-{secrets.token_hex(4)}-{name}"
    return STAGING_PREFIX + run, RETIRED_PREFIX + run


def _ours(entry: str, name: str) -> bool:
    """A ledger line's name is a leftover of output ``name``: a plain name of the shape leftover_names makes
    (a ledger someone edited names nothing outside the output's parent)."""
    return ("/" not in entry and "\0" not in entry and entry.endswith(f"-{name}")
            and entry.startswith((STAGING_PREFIX, RETIRED_PREFIX)))


def swap_in(staging: str, target: str, retired: str) -> None:
    """Replace ``target`` (a directory, or nothing) with ``staging``; the previous content is deleted. Without
    the exchange, the previous output is first moved to ``retired``."""
    if not os.path.lexists(target):
        move_in(staging, target)
        return
    try:
        exchange(staging, target)
    except ExchangeUnsupported:
        retire(target, retired)
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


def retire(target: str, retired: str) -> None:
    os.rename(target, retired)


def move_in(staging: str, target: str) -> None:
    os.rename(staging, target)


def discard(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def recover(parent: str, name: str, runs: tuple[tuple[str, ...], ...]) -> str | None:
    """Complete a two-rename swap of ``parent/name`` that a killed render left half done; what was done.
    ``runs``: the names earlier holders of the output's lock listed, one tuple per render (output_lock.py)."""
    target = os.path.join(parent, name)
    if os.path.lexists(target):
        return None
    for run in reversed(runs):  # the latest render first
        staged = [e for e in run if _ours(e, name) and e.startswith(STAGING_PREFIX) and _is_dir(parent, e)]
        retired = [e for e in run if _ours(e, name) and e.startswith(RETIRED_PREFIX) and _is_dir(parent, e)]
        if retired:
            os.rename(os.path.join(parent, (staged or retired)[0]), target)
            return "completed the swap a killed render left half done"
    return None


def remove_leftovers(parent: str, name: str, runs: tuple[tuple[str, ...], ...]) -> list[str]:
    """Delete the directories earlier renders of output ``name`` listed in its lock file and left behind; the
    names removed. Nothing else in ``parent`` is looked at."""
    removed = []
    for entry in sorted({e for run in runs for e in run}):
        if _ours(entry, name) and _is_dir(parent, entry):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
            removed.append(entry)
    return removed


def _is_dir(parent: str, entry: str) -> bool:
    path = os.path.join(parent, entry)
    return os.path.isdir(path) and not os.path.islink(path)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
