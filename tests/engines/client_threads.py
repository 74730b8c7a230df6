"""Threads that each hold a tritonclient.http client, made and closed in the thread itself.

tritonclient.http's client runs on gevent, whose hub belongs to the thread that made the client. Left to the
garbage collector (a ``threading.local`` whose threads have ended), the client's ``__del__`` closes it from
another thread, and gevent raises there ("'_Threadlocal' object has no attribute 'loop'", seen once in CI as
an unraisable-exception warning). Here each thread closes its own client before it ends.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any

_STOP = object()


class ClientThreads:
    """``count`` threads with a client each (``make()``, called in the thread at its first job, as the README's
    one-client-per-thread example makes it: a burst's first requests include it); ``map`` hands them work."""

    def __init__(self, count: int, make: Callable[[], Any]) -> None:
        self._make, self._jobs, self._count = make, queue.Queue(), count
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> ClientThreads:
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in self._threads:
            self._jobs.put(_STOP)
        for thread in self._threads:
            thread.join()

    def map(self, work: Callable[[Any, Any], Any], items: Iterable[Any]) -> list[Any]:
        """``work(client, item)`` for every item, across the threads; the results in the items' order (the first
        exception raised, if any, is raised here)."""
        items = list(items)
        results: list[Any] = [None] * len(items)
        errors: list[BaseException] = []
        for index, item in enumerate(items):
            self._jobs.put((work, index, item, results, errors))
            # A thread starts with each of the first jobs, as ThreadPoolExecutor starts its own: threads started
            # beforehand change a burst's timing (the warmup test's control, run without warmup, then saw most
            # fresh servers reject nothing: 4 of 5 and 3 of 5 in two runs, where it sees rejections here).
            if len(self._threads) < self._count:
                self._threads.append(threading.Thread(target=self._run, daemon=True))
                self._threads[-1].start()
        self._jobs.join()
        if errors:
            raise errors[0]
        return results

    def _run(self) -> None:
        client = None
        try:
            while (job := self._jobs.get()) is not _STOP:
                work, index, item, results, errors = job
                try:
                    if client is None:  # made at the thread's first job, as a lazy per-thread client is
                        client = self._make()
                    results[index] = work(client, item)
                except BaseException as error:  # noqa: BLE001 - handed to map's caller
                    errors.append(error)
                finally:
                    self._jobs.task_done()
            self._jobs.task_done()
        finally:
            if client is not None:
                client.close()
