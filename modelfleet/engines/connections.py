"""Closing the idle client connections a stopping child server waits for, so that its graceful stop is prompt.

Why: on SIGTERM, tritonserver (2.51, measured here) stops accepting connections and then waits for every
open HTTP connection to close, idle keep-alive ones included, counting down its ``--exit-timeout-secs``
("Timeout 29: Found 1 HTTP service connections"). A client that keeps a connection open (``requests`` and
``tritonclient`` sessions do) makes every stop take the whole timeout (30 s by default); the budget is then
spent, the server gives up unloading its models and exits 1 ("Exit timeout expired"). Idle gRPC channels
do not hold it up.

How: the server is our child, so on Linux (5.6+) ``pidfd_getfd`` gives us a duplicate of each of its
connected sockets; ``shutdown()`` on the duplicate closes the connection for both ends. Only connections
that carry no request are closed: on HTTP/1.1 a request in flight is one whose last data received is more
recent than the last data sent (``TCP_INFO``'s ``last_data_recv`` / ``last_data_sent``, milliseconds ago), so
a request being computed is answered before its connection goes. Elsewhere (another OS, an older kernel, a
seccomp policy that forbids the call) nothing is closed and the caller says what the server waits for.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
import sys
from pathlib import Path

SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture (a syscall added in 5.6)
TCP_ESTABLISHED = "01"  # /proc/net/tcp's state column
# struct tcp_info (<linux/tcp.h>): 8 one-byte fields; 24 u32 (rto ... total_retrans, with last_data_sent,
# last_ack_sent, last_data_recv at 9, 10, 11); u64 pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
# u32 segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out (Linux 4.6+)
_TCP_INFO = struct.Struct("8B24I4Q6I")
_LAST_DATA_SENT, _LAST_DATA_RECV, _BYTES_RECEIVED, _DATA_SEGS_OUT = 8 + 9, 8 + 11, 8 + 24 + 3, 8 + 24 + 4 + 5
TIE_SETTLED_MS = 1000  # see is_idle


class CannotClose(OSError):
    """This system does not let us reach the server's sockets (not Linux, no pidfd_getfd, not permitted)."""


def connected_sockets(pid: int, port: int, proc: Path = Path("/proc")) -> list[int]:
    """File descriptors (in process ``pid``) of its established TCP connections on local ``port``."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / str(pid) / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == TCP_ESTABLISHED and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return []
    try:
        descriptors = os.listdir(proc / str(pid) / "fd")
    except OSError:
        return []
    return sorted(int(fd) for fd in descriptors if _readlink(proc / str(pid) / "fd" / fd) in inodes)


def close_idle_connections(pid: int, port: int) -> int:
    """Close the connections of child ``pid`` on ``port`` that carry no request; how many were closed.

    Raises :class:`CannotClose` when this system does not allow it (the caller then waits as before)."""
    fds = connected_sockets(pid, port)
    if not fds:
        return 0
    closed = 0
    pidfd = _pidfd_open(pid)
    try:
        for fd in fds:
            sock = _duplicate(pidfd, fd)
            if sock is None:
                continue
            with sock:
                if is_idle(sock):
                    _shutdown(sock)
                    closed += 1
    finally:
        os.close(pidfd)
    return closed


def is_idle(sock: socket.socket) -> bool:
    """No request in flight (HTTP/1.1: one request at a time per connection), from the kernel's TCP_INFO.

    Never asked anything: idle. Asked and never answered: busy. Otherwise the last data received (a
    request) is compared with the last data sent (an answer), in milliseconds ago: an answer after the last
    request is idle, a request after the last answer busy. Both in the same millisecond (a fast answer, or a
    client that sent its next request at once) counts as idle once TIE_SETTLED_MS have passed quietly."""
    info = _TCP_INFO.unpack_from(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO.size))
    if info[_BYTES_RECEIVED] == 0:
        return True
    if info[_DATA_SEGS_OUT] == 0:
        return False
    received_ms_ago, sent_ms_ago = info[_LAST_DATA_RECV], info[_LAST_DATA_SENT]
    return received_ms_ago > sent_ms_ago or received_ms_ago == sent_ms_ago >= TIE_SETTLED_MS


def _pidfd_open(pid: int) -> int:
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):
        raise CannotClose(errno.ENOSYS, "pidfd_getfd needs Linux 5.6 or later")
    try:
        return os.pidfd_open(pid)
    except OSError as exc:
        raise CannotClose(exc.errno, f"pidfd_open: {exc.strerror}") from None


def _duplicate(pidfd: int, fd: int) -> socket.socket | None:
    """Our own descriptor of the server's socket ``fd``; None when it was closed meanwhile."""
    libc = ctypes.CDLL(None, use_errno=True)
    local = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
    if local >= 0:
        return socket.socket(fileno=local)
    code = ctypes.get_errno()
    if code == errno.EBADF:
        return None
    raise CannotClose(code, f"pidfd_getfd: {os.strerror(code)}")


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # the peer closed it meanwhile
        pass


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""
