"""Work spread over forked worker processes: the one pool pattern prewarm.py (the LLMs' simulations) and
cost/alternatives.py (each model's cheaper alternatives) share.

A fork inherits the parent's memory, so the workers read what they share (``shared()``: specs hold views that
do not pickle) instead of receiving it; only the work's index goes out and its result comes back. Workers
ignore SIGINT: a terminal's Ctrl-C reaches the whole process group, and the command, not each worker, answers
it (leaving the pool's block stops the workers). Forking needs the ``fork`` start method (Linux, macOS).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
from collections.abc import Iterator
from multiprocessing.pool import Pool
from typing import Any

_SHARED: list[Any] = []  # what the workers of the innermost running pool read


def can_fork(workers: int) -> bool:
    """Whether ``workers`` processes are worth forking here: more than one, and the platform forks."""
    return workers > 1 and "fork" in multiprocessing.get_all_start_methods()


@contextlib.contextmanager
def forked_pool(shared: Any, workers: int) -> Iterator[Pool]:
    """A pool of ``workers`` forked processes that read ``shared`` through ``shared()``."""
    _SHARED.append(shared)  # before the fork: the workers inherit it
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=ignore_interrupts) as pool:
            yield pool
    finally:
        _SHARED.pop()


def shared() -> Any:
    """In a worker: what its pool's ``forked_pool`` shared."""
    return _SHARED[-1]


def ignore_interrupts() -> None:
    """A forked worker's start (module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
