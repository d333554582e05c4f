"""Idle and slow clients, over real sockets, for the listener tests (issue 28 item 7).

A client here may open a TCP connection and never start TLS, finish the TLS handshake and never send
a request, or send a request header one line at a time (slowloris). :class:`Clients` holds many of
them and tells which ones the server has closed.
"""

from __future__ import annotations

import contextlib
import resource
import select
import socket
import ssl
import time
from dataclasses import dataclass, field

#: a request header that never ends: one more header line is sent at each :meth:`Clients.trickle`
SLOW_HEADER = b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def allow_descriptors(count: int) -> None:
    """Raise this process's soft descriptor limit to hold ``count`` sockets (within the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard) if hard != resource.RLIM_INFINITY else wanted,
                                                    hard))


@dataclass
class Clients:
    """Connections to ``port`` that an attacker holds open."""

    port: int
    context: ssl.SSLContext
    plain: list[socket.socket] = field(default_factory=list)  # TCP only: no TLS handshake
    quiet: list[ssl.SSLSocket] = field(default_factory=list)  # TLS done, no request
    slow: list[ssl.SSLSocket] = field(default_factory=list)  # TLS done, a header that never ends

    def connect_plain(self, count: int, *, give_up_after: float | None = None) -> int:
        """Open ``count`` TCP connections; with ``give_up_after``, a connection not made by then is skipped
        (a server that stopped accepting lets the kernel's queue fill). How many were made."""
        made = 0
        for _ in range(count):
            try:
                self.plain.append(socket.create_connection(("127.0.0.1", self.port), timeout=give_up_after or 30))
            except OSError:
                if give_up_after is None:
                    raise
                continue
            made += 1
        return made

    def _tls(self) -> ssl.SSLSocket:
        return self.context.wrap_socket(socket.create_connection(("127.0.0.1", self.port), timeout=30),
                                        server_hostname="127.0.0.1")

    def connect_quiet(self, count: int) -> None:
        for _ in range(count):
            self.quiet.append(self._tls())

    def connect_slow(self, count: int) -> None:
        for _ in range(count):
            sock = self._tls()
            sock.sendall(SLOW_HEADER)
            self.slow.append(sock)

    def all(self) -> list[socket.socket]:
        return [*self.plain, *self.quiet, *self.slow]

    def trickle(self) -> None:
        """One more header line on every slow connection still open."""
        for sock in self.slow:
            with contextlib.suppress(OSError):
                sock.send(b"X-Slow: 1\r\n")

    def open_ones(self) -> list[socket.socket]:
        """The connections the server has not closed (it closed the others: EOF or reset)."""
        found = []
        for sock in self.all():
            if sock.fileno() != -1 and not closed_by_peer(sock):
                found.append(sock)
        return found

    def wait_closed(self, within: float, *, trickle_every: float = 0.5) -> float:
        """Trickle header lines until the server closed every connection; the seconds it took (fails after
        ``within``)."""
        began = time.monotonic()
        while self.open_ones():
            if time.monotonic() - began > within:
                raise AssertionError(f"{len(self.open_ones())} of {len(self.all())} connections still open after "
                                     f"{within:.0f} s")
            self.trickle()
            time.sleep(trickle_every)
        return time.monotonic() - began

    def close(self) -> None:
        for sock in self.all():
            sock.close()


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the server closed ``sock`` (end of stream, or a reset); never blocks."""
    raw = sock.fileno()
    if raw == -1:
        return True
    poller = select.poll()  # select() cannot watch descriptors past 1023
    poller.register(raw, select.POLLIN)
    if not poller.poll(0):
        return False
    try:
        if isinstance(sock, ssl.SSLSocket):
            sock.setblocking(False)
            try:
                return sock.recv(4096) == b""
            finally:
                sock.setblocking(True)
        return sock.recv(4096, socket.MSG_PEEK) == b""
    except (ssl.SSLWantReadError, BlockingIOError):
        return False
    except OSError:  # reset, or the TLS stream cut without close_notify
        return True
