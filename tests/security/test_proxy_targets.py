"""The ownership proxy parses request targets strictly (docs/security.md, "The ownership proxy").

Raw HTTP, byte for byte, to a real :class:`OwnerProxy` in front of a real embedded cluster: an
absolute-form target, a path outside the API, dot segments (plain or percent-encoded) and ``*`` get
a 400 ``Status`` in JSON -- never a 500, never a traceback, never a request upstream -- with or
without a run token; API requests still go through; a token stops working when its run ends.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from hybrid_operator.ansible.proxy import OwnerProxy, RunCredentials
from hybrid_operator.kube.connection import Connection
from hybrid_operator.listeners import ConnectionLimits
from support.cluster import Cluster

pytestmark = [pytest.mark.security, pytest.mark.integration]

OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": "default", "uid": "u-1"}}


class ProxyThread:
    """An OwnerProxy on its own event loop in a thread."""

    def __init__(self, upstream: Connection, limits: ConnectionLimits | None = None) -> None:
        self.proxy = OwnerProxy(upstream, limits=limits)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self.proxy.start())

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def register(self) -> RunCredentials:
        async def register() -> RunCredentials:
            return self.proxy.register_run(OWNER)
        credentials: RunCredentials = self.call(register())
        return credentials

    def unregister(self, token: str) -> None:
        async def unregister() -> None:
            self.proxy.unregister_run(token)
        self.call(unregister())

    def close(self) -> None:
        self.call(self.proxy.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="module")
def proxy(shared_cluster: Cluster) -> Iterator[ProxyThread]:
    kubeconfig = yaml.safe_load(shared_cluster.kubeconfig.read_text())
    ca = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
    instance = ProxyThread(Connection(server=shared_cluster.url, ca_data=ca, token=shared_cluster.token))
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture
def token(proxy: ProxyThread) -> Iterator[str]:
    credentials = proxy.register()
    yield credentials.token
    proxy.unregister(credentials.token)


def raw(proxy: ProxyThread, request_line: str, token: str | None) -> tuple[int, dict[str, str], bytes]:
    """Send ``request_line`` and headers as raw bytes over TLS; (status, headers, body) of the answer."""
    context = ssl.create_default_context(cadata=proxy.proxy.ca_pem.decode())
    headers = [request_line, f"Host: 127.0.0.1:{proxy.proxy.port}", "Accept: application/json", "Connection: close"]
    if token:
        headers.append(f"Authorization: Bearer {token}")
    with socket.create_connection(("127.0.0.1", proxy.proxy.port), timeout=30) as plain, \
            context.wrap_socket(plain, server_hostname="127.0.0.1") as sock:
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {key.lower(): value for key, value in fields.items()}, body


HOSTILE_TARGETS = [
    "GET http://127.0.0.1/api HTTP/1.1",  # absolute-form
    "GET https://kubernetes.default.svc/api/v1/secrets HTTP/1.1",
    "GET / HTTP/1.1",
    "GET /metrics HTTP/1.1",
    "GET /api/../metrics HTTP/1.1",
    "GET /api/%2e%2e/metrics HTTP/1.1",
    "GET /apis/./apps/v1 HTTP/1.1",
    "GET /api//v1/namespaces HTTP/1.1",
    "OPTIONS * HTTP/1.1",
]


@pytest.mark.parametrize("with_token", [True, False], ids=["token", "no-token"])
@pytest.mark.parametrize("request_line", HOSTILE_TARGETS)
def test_hostile_request_targets_get_a_400_status(proxy: ProxyThread, token: str, request_line: str,
                                                  with_token: bool) -> None:
    status, headers, body = raw(proxy, request_line, token if with_token else None)
    assert status == 400, body[:300]
    assert headers.get("content-type", "").startswith("application/json")
    answer = json.loads(body)
    assert answer["kind"] == "Status" and answer["code"] == 400 and answer["reason"] == "BadRequest"
    assert b"Traceback" not in body


@pytest.mark.parametrize("path", ["/api", "/apis", "/version", "/api/v1/namespaces/default/configmaps?limit=1"])
def test_api_requests_still_pass(proxy: ProxyThread, token: str, path: str) -> None:
    status, _, body = raw(proxy, f"GET {path} HTTP/1.1", token)
    assert status == 200, body[:300]


def test_a_token_is_refused_once_its_run_ended(proxy: ProxyThread) -> None:
    credentials = proxy.register()
    assert raw(proxy, "GET /api HTTP/1.1", credentials.token)[0] == 200
    proxy.unregister(credentials.token)
    status, _, body = raw(proxy, "GET /api HTTP/1.1", credentials.token)
    assert status == 401 and json.loads(body)["kind"] == "Status"


def test_upstream_urls_are_built_from_parts() -> None:
    """The upstream's own path prefix is kept and the request path cannot change host or scheme."""
    proxy = OwnerProxy(Connection(server="https://api.example:6443/prefix/"))
    assert str(proxy._url("/api/v1/pods", "limit=1")) == "https://api.example:6443/prefix/api/v1/pods?limit=1"
    assert str(proxy._url("/api/%2F", "")) == "https://api.example:6443/prefix/api/%2F"
