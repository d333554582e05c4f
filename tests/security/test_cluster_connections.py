"""Issue 28 item 7: idle and slow clients cannot exhaust the embedded API server (docs/security.md,
"The embedded cluster: connections and data on disk").

Each test starts a real ``hybrid-operator cluster`` process and attacks it over real sockets:

* connections that never finish a request header (no TLS handshake, a handshake and nothing, a header
  sent one line at a time) are closed at the header deadline, as kube-apiserver's ``ReadHeaderTimeout``
  closes them (before: held for as long as the attacker liked);
* 1,100 idle connections against a server allowed 1,024 descriptors: the longest idle ones are closed
  to make room and a GET still answers (before: the GET took 55 s, and the log grew by thousands of
  tracebacks a second);
* when every connection has a request in progress, a new one is refused at once;
* descriptors running out while the server runs (its limit lowered under it): the repeated error is
  logged a bounded number of times, never a traceback per try, and a GET still answers;
* a request line far over the limit, still being sent when the server answers 414: the server reads
  the rest before it closes, so the client gets the 414 rather than a reset.
"""

from __future__ import annotations

import http.client
import json
import resource
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from security.connection_attacks import Clients, allow_descriptors, closed_by_peer
from support.cluster import Cluster, RawWatch, cluster_ssl_context, raw_request

pytestmark = [pytest.mark.security, pytest.mark.integration]

#: a GET must be answered within this while the attack goes on (a correctness bound, not a speed one)
ANSWERS_WITHIN = 10.0
REPEATED_ERROR_WORDS = ("Too many open files", "out of system resource", "out of file descriptors")


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Start a server process of this test's own, with extra command-line arguments."""
    started: list[Cluster] = []

    def run(*args: str) -> Cluster:
        instance = Cluster(tmp_path, extra_args=args)
        started.append(instance)
        instance.start()
        return instance

    yield run
    for instance in started:
        if instance.process is not None:
            instance.stop()


def get_answers(cluster: Cluster) -> None:
    response = raw_request(cluster, "GET", "/api/v1/namespaces/default", timeout=ANSWERS_WITHIN)
    assert response.status == 200, response.body[:300]


def log_since(cluster: Cluster, offset: int) -> str:
    with cluster.log_path.open("rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")


def test_connections_without_a_complete_header_are_closed_at_the_deadline(start: Callable[..., Cluster]) -> None:
    started = start("--header-timeout", "5")
    clients = Clients(started.port, cluster_ssl_context(started))
    try:
        clients.connect_plain(100)
        clients.connect_quiet(100)
        clients.connect_slow(100)
        get_answers(started)  # the 300 slow clients do not stop anyone else
        took = clients.wait_closed(within=20.0)
        assert took < 20.0
    finally:
        clients.close()
    get_answers(started)


def test_idle_connections_over_the_descriptor_limit_make_room_and_a_get_still_answers(
        start: Callable[..., Cluster]) -> None:
    started = start()
    assert started.process is not None
    allow_descriptors(1100)
    resource.prlimit(started.process.pid, resource.RLIMIT_NOFILE, (1024, 1024))
    offset = started.log_path.stat().st_size
    clients = Clients(started.port, cluster_ssl_context(started))
    try:
        clients.connect_plain(1100)
        get_answers(started)
        time.sleep(1.0)
        closed = sum(closed_by_peer(sock) for sock in clients.plain)
        assert closed >= 1100 - 1024, f"only {closed} of 1,100 idle connections were closed to make room"
    finally:
        clients.close()
    log = log_since(started, offset)
    assert "Traceback" not in log, log[-3000:]
    assert log.count("\n") < 20, f"{log.count(chr(10))} log lines for one attack:\n{log[-3000:]}"


def test_a_new_connection_is_refused_when_every_connection_is_busy(start: Callable[..., Cluster]) -> None:
    started = start("--max-connections", "20")
    watches = [RawWatch(started, "/api/v1/namespaces/default/configmaps?watch=true") for _ in range(20)]
    try:
        began = time.monotonic()
        with pytest.raises((ConnectionError, OSError, http.client.HTTPException)):
            raw_request(started, "GET", "/api/v1/namespaces/default", timeout=ANSWERS_WITHIN)
        assert time.monotonic() - began < ANSWERS_WITHIN, "the refused connection was left hanging"
        for watch in watches:  # refusing the newcomer closed none of the watches
            assert not closed_by_peer(watch.conn.sock), "a watch was closed to make room"
    finally:
        for watch in watches:
            watch.close()
    deadline = time.monotonic() + ANSWERS_WITHIN
    while True:  # the watches' connections are gone once the server has seen them close
        try:
            get_answers(started)
            break
        except (ConnectionError, OSError, http.client.HTTPException):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert "connection refused: every connection is busy" in started.log_path.read_text()


def test_running_out_of_descriptors_logs_the_error_a_bounded_number_of_times(start: Callable[..., Cluster]) -> None:
    started = start()
    assert started.process is not None
    allow_descriptors(700)
    clients = Clients(started.port, cluster_ssl_context(started))
    try:
        clients.connect_plain(300)
        time.sleep(0.5)
        offset = started.log_path.stat().st_size
        resource.prlimit(started.process.pid, resource.RLIMIT_NOFILE, (200, 200))  # 300 are open already
        for _ in range(6):  # newcomers for three seconds
            clients.connect_plain(50, give_up_after=0.5)
            time.sleep(0.5)
        time.sleep(2.0)
        log = log_since(started, offset)
        repeated = [line for line in log.splitlines() if any(word in line for word in REPEATED_ERROR_WORDS)]
        assert len(repeated) <= 10, f"{len(repeated)} log lines for the repeated error:\n" + "\n".join(repeated[:20])
        assert log.count("Traceback") <= 1, log[-3000:]
        get_answers(started)
    finally:
        clients.close()

def test_a_request_line_over_the_limit_is_answered_414_while_the_client_is_still_sending(
        start: Callable[..., Cluster]) -> None:
    started = start()
    context = cluster_ssl_context(started)
    for attempt in range(5):
        with socket.create_connection(("127.0.0.1", started.port), timeout=30) as plain, \
                context.wrap_socket(plain, server_hostname="127.0.0.1") as sock:
            sock.sendall(b"GET /api/v1/namespaces/default/configmaps?labelSelector=" + b"a" * 20000)
            for _ in range(4):  # the rest of a 80 KB request line, still coming after the answer was sent
                time.sleep(0.1)
                sock.sendall(b"a" * 15000)
            sock.sendall(f" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {started.token}\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.split(b" ")[1:2] == [b"414"], f"attempt {attempt}: {data[:300]!r}"
        answer = json.loads(body)
        assert answer["kind"] == "Status" and answer["code"] == 414, answer
    get_answers(started)

