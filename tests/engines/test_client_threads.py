"""The engine tests' client threads (client_threads.py): each client is made and closed in its own thread,
results keep the items' order, and a failure reaches the caller instead of hanging it."""

from __future__ import annotations

import threading

import pytest

from tests.engines.client_threads import ClientThreads


class Client:
    made: list[Client] = []

    def __init__(self) -> None:
        self.thread, self.closed_in = threading.get_ident(), None
        Client.made.append(self)

    def close(self) -> None:
        self.closed_in = threading.get_ident()


def test_each_client_is_closed_by_the_thread_that_made_it():
    Client.made = []
    with ClientThreads(4, Client) as threads:
        used = threads.map(lambda client, item: (item * 2, client.thread == threading.get_ident()), range(50))
    assert [value for value, _ in used] == [item * 2 for item in range(50)]
    assert all(same for _, same in used)
    # made lazily, at a thread's first job: one per thread that took any
    assert 1 <= len(Client.made) <= 4 and len({c.thread for c in Client.made}) == len(Client.made)
    assert all(c.closed_in == c.thread for c in Client.made)


def test_a_failing_job_or_client_is_raised_to_the_caller():
    with ClientThreads(2, Client) as threads:
        with pytest.raises(ZeroDivisionError):
            threads.map(lambda client, item: 1 / item, [1, 0, 2])
        assert threads.map(lambda client, item: item, [3]) == [3]  # the threads still serve

    def broken():
        raise ConnectionError("no server")
    with ClientThreads(2, broken) as threads:
        with pytest.raises(ConnectionError):
            threads.map(lambda client, item: item, range(5))
