"""Helpers for the embedded cluster's security tests: a probe of liveness and Status checks.

Each attack is sent over real HTTPS to a real ``hybrid-operator cluster``
process; afterwards the server must have answered with a Kubernetes
``Status`` (JSON, ``kind: Status``, its ``code`` equal to the HTTP status) and
must still answer a read within :data:`ALIVE_WITHIN` seconds.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

from support.cluster import Cluster, RawResponse, cluster_ssl_context

ALIVE_WITHIN = 0.100


class Probe:
    """A kept-alive HTTPS connection that times one small GET (no TLS handshake in the measurement)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.conn: http.client.HTTPSConnection | None = None

    def _connect(self) -> http.client.HTTPSConnection:
        conn = http.client.HTTPSConnection("127.0.0.1", self.cluster.port, context=cluster_ssl_context(self.cluster),
                                           timeout=10)
        conn.connect()
        return conn

    def _get(self, conn: http.client.HTTPSConnection) -> int:
        conn.request("GET", "/api/v1/namespaces/default",
                     headers={"Authorization": f"Bearer {self.cluster.token}", "Accept": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status

    def seconds(self) -> float:
        """How long one GET took; a fresh connection is warmed up first, outside the measurement."""
        if self.conn is None:
            self.conn = self._connect()
            self._get(self.conn)
        began = time.perf_counter()
        try:
            status = self._get(self.conn)
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = self._connect()
            self._get(self.conn)
            began = time.perf_counter()
            status = self._get(self.conn)
        elapsed = time.perf_counter() - began
        assert status == 200, f"the server answered a plain GET with {status}"
        return elapsed

    def assert_alive(self, after: str) -> None:
        best = min(self.seconds() for _ in range(3))
        assert best <= ALIVE_WITHIN, f"after {after}: a GET took {best * 1000:.0f} ms (limit {ALIVE_WITHIN * 1000:.0f})"

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def status_of(response: RawResponse, what: str) -> dict[str, Any]:
    """The response's Status body; fails unless it is JSON ``kind: Status`` carrying the HTTP code."""
    content_type = response.headers.get("Content-Type", "")
    assert content_type.startswith("application/json"), \
        f"{what}: answered {response.status} as {content_type!r}, not JSON: {response.body[:200]!r}"
    body = json.loads(response.body)
    assert body.get("kind") == "Status", f"{what}: answered {response.status} without a Status: {body!r:.300}"
    assert body.get("code") == response.status, f"{what}: Status code {body.get('code')} != HTTP {response.status}"
    assert response.status != 500, f"{what}: 500 {body.get('message')}"
    return dict(body)
