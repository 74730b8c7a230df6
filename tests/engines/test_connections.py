"""Closing a stopping server's idle client connections (modelfleet.engines.connections), on a real child
process with real sockets: idle ones close, a request in flight keeps its connection and gets its answer."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from modelfleet.engines.connections import TIE_SETTLED_MS, close_idle_connections, connected_sockets

SERVER = """
import socket, sys
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
answered, _ = listener.accept()
answered.recv(100)
answered.sendall(b"HTTP/1.1 200 OK\\r\\ncontent-length: 0\\r\\n\\r\\n")  # then idle, kept alive
silent, _ = listener.accept()  # connected, never sent anything
working, _ = listener.accept()
working.recv(100)  # a request being computed: no answer yet
print("busy", flush=True)
sys.stdin.readline()  # the test says when to answer
working.sendall(b"HTTP/1.1 200 OK\\r\\ncontent-length: 4\\r\\n\\r\\ndone")
sys.stdin.readline()
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfd_getfd is Linux-only")


def test_only_connections_without_a_request_in_flight_are_closed():
    child = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        answered = socket.create_connection(("127.0.0.1", port))
        answered.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert answered.recv(100).startswith(b"HTTP/1.1 200")
        silent = socket.create_connection(("127.0.0.1", port))
        working = socket.create_connection(("127.0.0.1", port))
        working.sendall(b"POST /infer HTTP/1.1\r\n\r\n")
        assert child.stdout.readline() == "busy\n"
        assert len(connected_sockets(child.pid, port)) == 3
        time.sleep(TIE_SETTLED_MS / 1000 + 0.2)  # the answer may have left in the millisecond the request came

        assert close_idle_connections(child.pid, port) == 2
        assert answered.recv(100) == b"" and silent.recv(100) == b""  # closed: the peer sees end of stream
        assert len(connected_sockets(child.pid, port)) == 1
        child.stdin.write("answer\n")
        child.stdin.flush()
        assert working.recv(100).endswith(b"done")  # the request in flight was answered on its connection
        assert close_idle_connections(child.pid, port) == 1  # and once answered, it is idle too
    finally:
        child.kill()
        child.wait()
