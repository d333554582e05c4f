"""Issue 28 item 7: no watch of the embedded API server lasts for ever (docs/security.md, "The embedded
cluster: connections and data on disk").

kube-apiserver decodes ``timeoutSeconds`` with Go's ``strconv.ParseInt(s, 10, 64)``
(k8s.io/apimachinery runtime.Convert_Slice_string_To_Pointer_int64) and answers what it cannot
parse with 400 BadRequest carrying Go's error, for a LIST as for a WATCH. A negative value is
allowed and times the watch out at once (apiserver endpoints/request.GetTimeoutForWatch: "we allow
a negative value"); no value (or 0) gives a deadline between ``--min-request-timeout`` and twice
that. Before, any value that was not all digits (``abc``, ``-5``, ``1e20``) gave a watch with no
deadline at all, and so did no value.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cluster import Cluster, cluster_ssl_context

pytestmark = [pytest.mark.security, pytest.mark.integration]

CMS = "/api/v1/namespaces/default/configmaps"
REFUSED = [
    ("abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
    ("1e20", 'strconv.ParseInt: parsing "1e20": invalid syntax'),
    ("100000000000000000000", 'strconv.ParseInt: parsing "100000000000000000000": value out of range'),
    ("", 'strconv.ParseInt: parsing "": invalid syntax'),
    ("5s", 'strconv.ParseInt: parsing "5s": invalid syntax'),
]


def open_request(cluster: Cluster, path: str) -> tuple[http.client.HTTPSConnection, http.client.HTTPResponse]:
    conn = http.client.HTTPSConnection("127.0.0.1", cluster.port, context=cluster_ssl_context(cluster), timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {cluster.token}", "Accept": "application/json"})
    return conn, conn.getresponse()


def ended_within(response: http.client.HTTPResponse, seconds: float) -> float:
    """Read the stream to its end; how long that took (fails when it is still open after ``seconds``)."""
    began = time.monotonic()
    while True:
        try:
            line = response.readline()
        except TimeoutError:
            pytest.fail(f"the watch was still open after {time.monotonic() - began:.0f} s")
        if not line:
            return time.monotonic() - began
        if time.monotonic() - began > seconds:
            pytest.fail(f"the watch was still open after {seconds:.0f} s")


@pytest.mark.parametrize("verb", ["watch", "list"])
@pytest.mark.parametrize(("value", "message"), REFUSED, ids=[value or "empty" for value, _ in REFUSED])
def test_a_timeout_that_is_not_an_int64_is_a_400(shared_cluster: Cluster, verb: str, value: str,
                                                 message: str) -> None:
    query = f"timeoutSeconds={value}" + ("&watch=true" if verb == "watch" else "")
    conn, response = open_request(shared_cluster, f"{CMS}?{query}")
    try:
        assert response.status == 400, f"{verb} with timeoutSeconds={value!r} answered {response.status}"
        status = json.loads(response.read())
    finally:
        conn.close()
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": "BadRequest", "code": 400}


def test_a_negative_timeout_ends_the_watch_at_once(shared_cluster: Cluster) -> None:
    conn, response = open_request(shared_cluster, f"{CMS}?watch=true&timeoutSeconds=-5")
    try:
        assert response.status == 200
        ended_within(response, 5.0)
    finally:
        conn.close()


@pytest.fixture
def short_min_timeout(tmp_path: Path) -> Iterator[Cluster]:
    instance = Cluster(tmp_path, extra_args=("--min-request-timeout", "2"))
    instance.start()
    try:
        yield instance
    finally:
        instance.stop()


def test_a_watch_without_a_timeout_ends_between_min_and_twice_min(short_min_timeout: Cluster) -> None:
    for query in ("watch=true", "watch=true&timeoutSeconds=0"):
        conn, response = open_request(short_min_timeout, f"{CMS}?{query}")
        try:
            assert response.status == 200
            took = ended_within(response, 15.0)
        finally:
            conn.close()
        assert took >= 1.5, f"{query}: ended after {took:.1f} s, before --min-request-timeout"
