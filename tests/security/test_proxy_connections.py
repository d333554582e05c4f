"""Issue 28 item 7: idle and slow clients cannot exhaust the ownership proxy (docs/security.md, "Against
anything on the network but the API server").

A real :class:`OwnerProxy` (as ``test_proxy_targets``) in front of the session's embedded cluster,
attacked over real sockets, with short deadlines and a small cap so that the tests are quick (the
defaults are kube-apiserver's 32 s and 90 s, and half the process's descriptors):

* connections without a complete request header (no TLS, TLS and nothing, a header one line at a
  time) are closed at the header deadline (before: held until the attacker let go);
* idle connections beyond the cap make room (the longest idle one is closed) and a proxied GET still
  answers (before: nothing bounded them, each held a descriptor of the operator);
* with every connection busy (watches through the proxy), a new one is refused at once, and no
  watch is closed to make room.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import time
from collections.abc import Iterator

import pytest
import yaml

from hybrid_operator.kube.connection import Connection
from hybrid_operator.listeners import ConnectionLimits
from security.connection_attacks import Clients, closed_by_peer
from security.test_proxy_targets import ProxyThread
from support.cluster import Cluster

pytestmark = [pytest.mark.security, pytest.mark.integration]

CAP = 30
LIMITS = ConnectionLimits(header_timeout=2.0, idle_timeout=5.0, max_connections=CAP)
ANSWERS_WITHIN = 10.0


@pytest.fixture
def proxy(shared_cluster: Cluster) -> Iterator[ProxyThread]:
    kubeconfig = yaml.safe_load(shared_cluster.kubeconfig.read_text())
    ca = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
    instance = ProxyThread(Connection(server=shared_cluster.url, ca_data=ca, token=shared_cluster.token), LIMITS)
    try:
        yield instance
    finally:
        instance.close()


def context(proxy: ProxyThread) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=proxy.proxy.ca_pem.decode())


def request(proxy: ProxyThread, token: str, path: str) -> tuple[http.client.HTTPSConnection, http.client.HTTPResponse]:
    conn = http.client.HTTPSConnection("127.0.0.1", proxy.proxy.port, context=context(proxy), timeout=ANSWERS_WITHIN)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    return conn, conn.getresponse()


def get_answers(proxy: ProxyThread, token: str) -> None:
    conn, response = request(proxy, token, "/api/v1/namespaces/default")
    try:
        assert response.status == 200, response.read()[:300]
    finally:
        conn.close()


def test_connections_without_a_complete_header_are_closed_at_the_deadline(proxy: ProxyThread) -> None:
    token = proxy.register().token
    clients = Clients(proxy.proxy.port, context(proxy))
    try:
        clients.connect_plain(8)
        clients.connect_quiet(8)
        clients.connect_slow(8)
        get_answers(proxy, token)
        assert clients.wait_closed(within=15.0) < 15.0
    finally:
        clients.close()
    get_answers(proxy, token)


def test_idle_connections_over_the_cap_make_room_and_a_get_still_answers(proxy: ProxyThread) -> None:
    token = proxy.register().token
    clients = Clients(proxy.proxy.port, context(proxy))
    try:
        clients.connect_plain(200)
        get_answers(proxy, token)
        time.sleep(1.0)
        closed = sum(closed_by_peer(sock) for sock in clients.plain)
        assert closed >= 200 - CAP, f"only {closed} of 200 idle connections were closed (cap {CAP})"
    finally:
        clients.close()


def test_a_new_connection_is_refused_when_every_connection_is_busy(proxy: ProxyThread) -> None:
    token = proxy.register().token
    watches = [request(proxy, token, "/api/v1/namespaces/default/configmaps?watch=true") for _ in range(CAP)]
    try:
        assert all(response.status == 200 for _, response in watches)
        began = time.monotonic()
        with pytest.raises((ConnectionError, OSError, http.client.HTTPException)):
            get_answers(proxy, token)
        assert time.monotonic() - began < ANSWERS_WITHIN, "the refused connection was left hanging"
        for conn, _ in watches:
            assert conn.sock is not None and not closed_by_peer(conn.sock), "a watch was closed to make room"
    finally:
        for conn, _ in watches:
            conn.close()
    deadline = time.monotonic() + ANSWERS_WITHIN
    while True:
        try:
            get_answers(proxy, token)
            return
        except (ConnectionError, OSError, http.client.HTTPException):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
