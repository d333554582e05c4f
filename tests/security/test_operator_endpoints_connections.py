"""Issue 28 item 7: the operator's plain-HTTP endpoints (metrics, health probes, the playbook-metrics
receiver) bound idle and slow clients like its other listeners (docs/security.md, "Against anything on
the network but the API server").

The real ``health.serve`` (which ``hybrid-operator run`` serves ``/metrics``, ``/healthz`` and the
osdk_metric receiver with) on its own event loop, with its limits shortened so that the test is quick
(the defaults: kube-apiserver's 32 s header deadline, a 2 s keep-alive and 64 connections), attacked over
real sockets: a header sent one line at a time is cut off; idle connections beyond the cap make room and
a scrape still answers (before: nothing capped them).
"""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from hybrid_operator.listeners import ConnectionLimits
from hybrid_operator.manager import health
from hybrid_operator.manager.metrics import metrics_app
from security.connection_attacks import SLOW_HEADER, closed_by_peer

pytestmark = [pytest.mark.security, pytest.mark.integration]

CAP = 20


class EndpointThread:
    """``health.serve`` of the metrics app on a loop of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner: web.AppRunner | None = self.call(
            health.serve(metrics_app(lambda: "up 1\n"), "127.0.0.1:0", "metrics"))
        assert self.runner is not None
        self.port = int(next(a for a in self.runner.addresses if isinstance(a, tuple))[1])

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def close(self) -> None:
        self.call(health.stop(self.runner))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[EndpointThread]:
    monkeypatch.setattr(health, "ENDPOINT_LIMITS", ConnectionLimits(header_timeout=1.0, idle_timeout=30.0,
                                                                    max_connections=CAP))
    instance = EndpointThread()
    try:
        yield instance
    finally:
        instance.close()


def scrape(endpoint: EndpointThread) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200 and b"up 1" in response.read()
    finally:
        conn.close()


def test_a_header_sent_one_line_at_a_time_is_cut_off(endpoint: EndpointThread) -> None:
    slow = [socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) for _ in range(10)]
    try:
        began = time.monotonic()
        for sock in slow:
            sock.sendall(SLOW_HEADER)
        while not all(closed_by_peer(sock) for sock in slow):
            assert time.monotonic() - began < 10.0, "slow headers still open after 10 s"
            for sock in slow:
                try:
                    sock.send(b"X-Slow: 1\r\n")
                except OSError:
                    continue
            time.sleep(0.3)
    finally:
        for sock in slow:
            sock.close()
    scrape(endpoint)


def test_idle_connections_over_the_cap_make_room_and_a_scrape_still_answers(endpoint: EndpointThread) -> None:
    idle = [socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) for _ in range(100)]
    try:
        scrape(endpoint)
        time.sleep(0.5)
        closed = sum(closed_by_peer(sock) for sock in idle)
        assert closed >= 100 - CAP, f"only {closed} of 100 idle connections were closed (cap {CAP})"
    finally:
        for sock in idle:
            sock.close()
