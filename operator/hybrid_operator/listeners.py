"""What an idle or slow client may hold on one of our HTTP listeners, and for how long.

aiohttp on its own keeps a connection whose request header never completes for about an hour (its
keep-alive default), asyncio waits 60 s for a TLS handshake, nothing caps the number of open
connections, and when ``accept()`` runs out of file descriptors asyncio logs a full traceback for
every try, many times a second. An attacker who can reach a port could thus hold it, slow every
other client down to a minute per request, and fill the disk with logs. Every listener of the
project (the embedded API server, the operator's ownership proxy, the metrics, health and
playbook-metrics endpoints, ``preview``'s local endpoint) is therefore served through this module:

* **Header deadline** (kube-apiserver's ``ReadHeaderTimeout``, 32 s): a new connection must finish
  its TLS handshake and the header of its first request within it; on a kept-alive connection, a
  request's header must be complete within it of its first byte. Otherwise the connection is
  aborted, as Go's server does (no answer).
* **Idle deadline** (kube-apiserver's ``IdleTimeout``, 90 s): a kept-alive connection without a
  request is closed. TLS close handshakes wait at most :data:`TLS_SHUTDOWN_SECONDS` for the peer.
* **A connection cap** (by default what the process's descriptor limit leaves, see
  :func:`descriptor_budget`; read again at every ``accept()``, so it follows a limit lowered
  while the process runs): at the cap a new connection makes room by closing the connection
  that has been idle longest (no request in progress: waiting for a header, a TLS handshake, or a
  next request), as nginx reuses keep-alive connections; when every connection is busy with a
  request, the new one is refused (closed at once). Requests in progress, watches among them,
  are never closed to make room. Running out of descriptors in ``accept()`` closes an idle
  connection the same way, or pauses accepting for a second.
* **Lingering close** after a request the parser refused (a request line over the limit, a
  malformed header): the answer is sent, then what the client still sends is read and dropped
  (at most :attr:`ConnectionLimits.linger_bytes`, for at most
  :attr:`ConnectionLimits.linger_seconds`, until it stops sending for
  :data:`LINGER_QUIET_SECONDS`), so that the client reads the answer instead of a reset.
* **Repeated errors are logged at most once per** :data:`REPEAT_LOG_SECONDS` (:class:`RepeatLimiter`),
  with the count of the ones left out: every record of the ``asyncio`` and ``aiohttp.server``
  loggers (accept errors, protocol errors) and of this module (refusals, closed connections) that
  repeats one seen within that time.

This module imports nothing else from the project: the embedded cluster and the operator share it
(``.importlinter``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import web, web_protocol, web_request, web_server
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.http_parser import RawRequestMessage

log = logging.getLogger(__name__)

#: kube-apiserver's http.Server: ReadHeaderTimeout and IdleTimeout
HEADER_TIMEOUT_SECONDS = 32.0
IDLE_TIMEOUT_SECONDS = 90.0
#: how long a TLS close waits for the peer's close_notify before the socket is dropped anyway
TLS_SHUTDOWN_SECONDS = 5.0
#: descriptors kept back from the connection cap for everything else a process opens
RESERVED_DESCRIPTORS = 64
#: a lingering close ends once the client has sent nothing for this long
LINGER_QUIET_SECONDS = 1.0
#: a repeated log record (same logger, message and exception type) is let through once per this many seconds
REPEAT_LOG_SECONDS = 30.0
#: ``accept()`` errors that mean the process (or the system) has no descriptor or buffer left
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: how long accepting pauses when accept() ran out of descriptors and nothing could be closed (asyncio's own delay)
_ACCEPT_PAUSE_SECONDS = 1.0
#: connections closed to make room whose descriptor may still be open (they close within a turn or two of the
#: event loop); accepting waits for them beyond this many, so that the descriptors in use stay below the cap plus
#: this (the reserve of descriptor_budget covers it); one still open after _RELEASE_SECONDS is not waited for
_MAX_RELEASING = 16
_RELEASE_SECONDS = 1.0


def descriptor_budget(share: float = 1.0, reserve: int = RESERVED_DESCRIPTORS) -> int:
    """``share`` of the file descriptors this process may open (its soft ``RLIMIT_NOFILE``) beyond ``reserve``."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 20
    return max(8, int((soft - reserve) * share))


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds of one listener (see the module docstring); ``max_connections`` 0 means
    ``descriptor_budget(descriptor_share)``, the share of the process's descriptors this listener may hold."""

    header_timeout: float = HEADER_TIMEOUT_SECONDS
    idle_timeout: float = IDLE_TIMEOUT_SECONDS
    max_connections: int = 0
    descriptor_share: float = 1.0
    linger_seconds: float = 5.0
    linger_bytes: int = 1024 * 1024

    def cap(self) -> int:
        return self.max_connections if self.max_connections > 0 else descriptor_budget(self.descriptor_share)


# -- logging ------------------------------------------------------------------------------------------


class RepeatLimiter(logging.Filter):
    """Lets a repeated record through once per ``interval`` seconds, then reports how many were left out.

    Records repeat when they come from the same logger with the same message (before formatting),
    exception type and ``listener`` (an extra of this module's records). The first one passes whole,
    traceback included; the next one to pass (after ``interval``) carries ``suppressed=<n>`` and no
    traceback, only the error's text.
    """

    def __init__(self, interval: float = REPEAT_LOG_SECONDS) -> None:
        super().__init__()
        self.interval = interval
        self._seen: dict[tuple[str, str, str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        key = (record.name, str(record.msg)[:200], type(error).__name__ if error is not None else "",
               str(getattr(record, "listener", "")))
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.interval:
                self._seen[key] = (seen[0], seen[1] + 1)
                return False
            self._seen[key] = (now, 0)
            if len(self._seen) > 1024:  # forget the oldest keys: a bounded table, whatever the messages
                for old in sorted(self._seen, key=lambda k: self._seen[k][0])[:512]:
                    del self._seen[old]
        if seen is not None:
            if seen[1]:
                record.suppressed = seen[1]
            if error is not None:
                record.error = str(error) or type(error).__name__
                record.exc_info, record.exc_text = None, None
        return True


#: the loggers whose repeated records are limited, and the limiter they share
LIMITED_LOGGERS = ("asyncio", "aiohttp.server", __name__)
_LIMITER = RepeatLimiter()


def limit_repeated_logs() -> None:
    """Install :class:`RepeatLimiter` on :data:`LIMITED_LOGGERS` (once per process)."""
    for name in LIMITED_LOGGERS:
        logger = logging.getLogger(name)
        if _LIMITER not in logger.filters:
            logger.addFilter(_LIMITER)


# -- connections --------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Connection:
    """One accepted socket, from ``accept()`` until it is closed."""

    sock: socket.socket
    accepted_at: float
    handler: GuardedRequestHandler | None = None  # None until the TLS handshake is done
    evicted: bool = False

    def idle_since(self) -> float | None:
        """Since when nothing is in progress on it, or None while a request is."""
        if self.handler is None:
            return self.accepted_at
        return self.handler.idle_since()

    def close(self) -> None:
        """Close it now, whatever state it is in."""
        self.evicted = True
        transport = self.handler.transport if self.handler is not None else None
        if transport is not None:
            transport.abort()
            return
        with contextlib.suppress(OSError):  # a handshake in progress: asyncio sees the end of the stream
            self.sock.shutdown(socket.SHUT_RDWR)


@dataclass(eq=False)
class ConnectionTable:
    """The open connections of one server (all its listening sockets), and the cap on their number."""

    name: str
    limits: ConnectionLimits
    _by_fd: dict[int, _Connection] = field(default_factory=dict)
    _releasing: list[tuple[float, _Connection]] = field(default_factory=list)  # closed to make room, fd maybe open
    _paused_until: float = 0.0

    @property
    def cap(self) -> int:
        """The cap now: it follows the descriptor limit, which may change while the process runs."""
        return self.limits.cap()

    def open_count(self) -> int:
        return len(self._prune())

    def _prune(self) -> dict[int, _Connection]:
        for fd, connection in list(self._by_fd.items()):
            if connection.evicted or connection.sock.fileno() == -1:
                del self._by_fd[fd]
        return self._by_fd

    def accept(self, listener: socket.socket) -> tuple[socket.socket, Any]:
        """``listener.accept()`` within the cap (see the module docstring); BlockingIOError when nothing
        more is to be accepted now (asyncio's accept loop then waits for the next readiness)."""
        now = time.monotonic()
        if now < self._paused_until:
            raise BlockingIOError(errno.EAGAIN, "accepting is paused")
        while True:
            self._releasing = [(at, c) for at, c in self._releasing
                               if c.sock.fileno() != -1 and now - at < _RELEASE_SECONDS]
            if len(self._releasing) >= _MAX_RELEASING:
                raise BlockingIOError(errno.EAGAIN, "connections closed to make room are not gone yet")
            try:
                conn, address = socket.socket.accept(listener)
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                return self._out_of_descriptors(exc, now)
            cap = self.cap
            if len(self._by_fd) >= cap and len(self._prune()) >= cap:
                if not self._make_room():
                    log.warning("connection refused: every connection is busy",
                                extra={"listener": self.name, "max_connections": cap})
                    conn.close()
                    continue  # the next one waiting, if any (BlockingIOError ends the loop)
                log.info("connection limit reached: closed the longest idle connection",
                         extra={"listener": self.name, "max_connections": cap})
            self._by_fd[conn.fileno()] = _Connection(conn, now)
            return conn, address

    def _out_of_descriptors(self, exc: OSError, now: float) -> tuple[socket.socket, Any]:
        if self._releasing:  # a connection closed to make room is about to give its descriptor back
            raise BlockingIOError(errno.EAGAIN, "accept again once the closed connection is gone") from exc
        if self._make_room():
            log.warning("out of file descriptors: closed the longest idle connection",
                        extra={"listener": self.name, "open": len(self._by_fd), "error": exc.strerror})
            raise BlockingIOError(errno.EAGAIN, "accept again once the closed connection is gone") from exc
        self._paused_until = now + _ACCEPT_PAUSE_SECONDS
        log.warning("out of file descriptors: not accepting connections for a second",
                    extra={"listener": self.name, "open": len(self._by_fd), "error": exc.strerror})
        raise exc  # asyncio pauses this listener for a second too (its own message is limited: limit_repeated_logs)

    def _make_room(self) -> bool:
        """Close the connection idle the longest; False when every one has a request in progress."""
        oldest: tuple[float, int, _Connection] | None = None
        for fd, connection in self._prune().items():
            since = connection.idle_since()
            if since is not None and (oldest is None or since < oldest[0]):
                oldest = (since, fd, connection)
        if oldest is None:
            return False
        _, fd, connection = oldest
        connection.close()
        del self._by_fd[fd]
        self._releasing.append((time.monotonic(), connection))
        return True

    def attach(self, handler: GuardedRequestHandler, transport: asyncio.BaseTransport) -> int:
        """Link an accepted socket to its handler (once its TLS handshake is done); its descriptor, or -1."""
        sock = transport.get_extra_info("socket")
        fd = sock.fileno() if sock is not None else -1
        connection = self._by_fd.get(fd)
        if connection is None:
            return -1
        connection.handler = handler
        return fd

    def detach(self, handler: GuardedRequestHandler, fd: int) -> None:
        connection = self._by_fd.get(fd)
        if connection is not None and connection.handler is handler:
            del self._by_fd[fd]

    def close_all(self) -> None:
        """Close every connection still open (the server stops)."""
        for connection in list(self._prune().values()):
            connection.close()
        self._by_fd.clear()


class _Listener(socket.socket):
    """A listening socket whose ``accept()`` (called by asyncio) goes through a :class:`ConnectionTable`."""

    __slots__ = ("table",)
    table: ConnectionTable

    def accept(self) -> tuple[socket.socket, Any]:
        return self.table.accept(self)


class _LingeringResponse(web.Response):
    """An answer to a request the parser refused: sent, then the connection lingers before it closes."""

    def __init__(self, handler: GuardedRequestHandler, answer: web.Response) -> None:
        body = answer.body if isinstance(answer.body, bytes) else answer.text.encode() if answer.text else b""
        super().__init__(status=answer.status, body=body, content_type=answer.content_type, charset=answer.charset)
        self._handler = handler
        self.force_close()

    async def write_eof(self, data: bytes = b"") -> None:
        await super().write_eof(data)
        await self._handler.linger()


class GuardedRequestHandler(web_protocol.RequestHandler):
    """aiohttp's protocol handler with a header deadline, an idle state for the cap, and a lingering close."""

    table: ConnectionTable
    limits: ConnectionLimits

    def setup(self, table: ConnectionTable) -> None:
        """Called by :class:`GuardedServer` right after construction, at ``accept()`` time."""
        self.table, self.limits = table, table.limits
        now = time.monotonic()
        self.accepted_at = self._idle_since = self._last_data = now
        self._header_timer: asyncio.TimerHandle | None = None
        self._draining = False
        self._drained = 0
        self._peer_done = False
        self._fd = -1

    # -- state

    def idle_since(self) -> float | None:
        """Since when no request is in progress (waiting for one, or closing), None while one is."""
        if self._draining or self.transport is None:
            return self._idle_since
        waiting = self._waiter is not None and not self._waiter.done()
        return self._idle_since if waiting and not self._messages and not self._request_in_progress else None

    # -- the connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._fd = self.table.attach(self, transport)
        self._idle_since = time.monotonic()
        self._arm_header_timer(self.accepted_at + self.limits.header_timeout)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_header_timer()
        self._peer_done = True
        self.table.detach(self, self._fd)
        super().connection_lost(exc)

    def eof_received(self) -> None:
        self._peer_done = True

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        self._last_data = now
        if self._draining:
            self._drained += len(data)
            return
        waiting = self._waiter is not None and not self._waiter.done()
        parsed = self._request_count
        super().data_received(data)
        if self._request_count != parsed:
            self._cancel_header_timer()
            if any(not isinstance(message, RawRequestMessage) for message, _ in self._messages):
                self._draining = True  # the parser refused the request: the rest of what comes is dropped
        elif waiting and data and self._header_timer is None:
            self._arm_header_timer(now + self.limits.header_timeout)

    async def finish_response(self, request: web_request.BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self._idle_since = time.monotonic()

    # -- the header deadline

    def _arm_header_timer(self, deadline: float) -> None:
        self._cancel_header_timer()
        delay = max(0.0, deadline - time.monotonic())
        self._header_timer = self._loop.call_later(delay, self._header_deadline)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_deadline(self) -> None:
        self._header_timer = None
        if self._request_in_progress or self._messages or self._draining or self.transport is None:
            return
        log.info("connection closed: no complete request header in time",
                 extra={"listener": self.table.name, "header_timeout": self.limits.header_timeout})
        self.transport.abort()

    # -- errors and the lingering close

    def handle_error(self, request: web_request.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        answer = self.error_response(request, status, exc, message)
        if isinstance(exc, HttpProcessingError) and isinstance(answer, web.Response):
            return _LingeringResponse(self, answer)
        return answer

    def error_response(self, request: web_request.BaseRequest, status: int, exc: BaseException | None,
                       message: str | None) -> web.StreamResponse:
        """The answer to an error (aiohttp's plain text one); servers override it to answer in their own format."""
        return super().handle_error(request, status, exc, message)

    async def linger(self) -> None:
        """Read and drop what the client still sends, within the bounds (module docstring)."""
        self._draining = True
        deadline = time.monotonic() + self.limits.linger_seconds
        while not self._peer_done and self.transport is not None and self._drained < self.limits.linger_bytes:
            now = time.monotonic()
            quiet_left = self._last_data + LINGER_QUIET_SECONDS - now
            if quiet_left <= 0 or now >= deadline:
                return
            await asyncio.sleep(min(quiet_left, deadline - now))


class GuardedServer(web_server.Server):
    """aiohttp's connection factory: a :class:`GuardedRequestHandler` (or a subclass) per accepted connection."""

    table: ConnectionTable
    handler_class: type[GuardedRequestHandler]

    def __call__(self) -> web_protocol.RequestHandler:
        handler = self.handler_class(self, loop=self._loop, **self._kwargs)
        handler.setup(self.table)
        return handler


class GuardedRunner(web.AppRunner):
    """An ``AppRunner`` whose connections are bounded by ``limits``; serve it with :func:`serve`."""

    def __init__(self, app: web.Application, *, name: str, limits: ConnectionLimits | None = None,
                 handler_class: type[GuardedRequestHandler] = GuardedRequestHandler, **kwargs: Any) -> None:
        self.limits = limits or ConnectionLimits()
        kwargs.setdefault("keepalive_timeout", self.limits.idle_timeout)
        super().__init__(app, **kwargs)
        self.table = ConnectionTable(name, self.limits)
        self._handler_class = handler_class

    async def _make_server(self) -> web_server.Server:
        server = await super()._make_server()
        server.__class__ = GuardedServer
        guarded = cast(GuardedServer, server)
        guarded.table, guarded.handler_class = self.table, self._handler_class
        return guarded

    async def cleanup(self) -> None:
        """Stops serving; connections still open afterwards (idle TLS ones, handshakes) are closed too."""
        await super().cleanup()
        self.table.close_all()


class GuardedSite(web.BaseSite):
    """A site on one listening socket of ours, with the TLS handshake bounded by the header deadline."""

    def __init__(self, runner: GuardedRunner, sock: _Listener, *, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=128)
        self._sock = sock
        self._limits = runner.limits
        host, port = sock.getsockname()[:2]
        self._name = f"{'https' if ssl_context else 'http'}://{host}:{port}"

    @property
    def name(self) -> str:
        return self._name

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        tls: dict[str, Any] = {}
        if self._ssl_context is not None:
            tls = {"ssl": self._ssl_context, "ssl_handshake_timeout": self._limits.header_timeout,
                   "ssl_shutdown_timeout": TLS_SHUTDOWN_SECONDS}
        self._server = await asyncio.get_running_loop().create_server(server, sock=self._sock,
                                                                      backlog=self._backlog, **tls)


def bind(table: ConnectionTable, host: str | None, port: int) -> list[_Listener]:
    """Listening sockets for ``host`` (None or "": every interface) and ``port`` (0: a free one), bound as asyncio
    binds them."""
    infos = socket.getaddrinfo(host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    sockets: list[_Listener] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            try:
                sock = _Listener(family, kind, proto)
            except OSError:  # an address family this host does not have (IPv6 turned off)
                continue
            sockets.append(sock)
            sock.table = table
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


async def serve(runner: GuardedRunner, host: str | None, port: int,
                ssl_context: ssl.SSLContext | None = None) -> list[tuple[str, int]]:
    """Serve ``runner`` (set up already) on ``host``:``port``; the (host, port) pairs it listens on."""
    limit_repeated_logs()
    sockets = bind(runner.table, host, port)
    try:
        for sock in sockets:
            await GuardedSite(runner, sock, ssl_context=ssl_context).start()
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return [cast(tuple[str, int], sock.getsockname()[:2]) for sock in sockets]
