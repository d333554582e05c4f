"""Watch semantics of the embedded API server, checked at the protocol level over HTTPS.

kopf, kubectl, helm (kstatus) and the Python client each rely on a different
corner of kube-apiserver's watch contract: synthetic ADDED events, resume from a
resourceVersion, 410 Expired, BOOKMARKs, selector moves, ``timeoutSeconds``,
``sendInitialEvents`` and one flushed JSON event per line.  These tests read the
raw stream line by line, each line with a deadline, against a real server process
started with frequent bookmarks and a small watch history.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from support.cluster import Cluster, RawWatch, raw_request

pytestmark = pytest.mark.integration

HISTORY = 40


@pytest.fixture(scope="module")
def wc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster with 1 s bookmarks and a 40-event watch history (to age RVs out quickly)."""
    instance = Cluster(Path(tmp_path_factory.mktemp("watch")),
                       extra_args=("--bookmark-interval", "1", "--watch-history", str(HISTORY)))
    instance.start()
    try:
        yield instance
    finally:
        if instance.process is not None:
            instance.stop()


ROOT_CA = "kube-root-ca.crt"  # every namespace's CA bundle, which these watches leave out


def namespace(c: Cluster, name: str) -> str:
    answer = raw_request(c, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert answer.status == 201, answer.body
    deadline = time.monotonic() + 10
    while raw_request(c, "GET", f"{cms(name)}/{ROOT_CA}").status != 200:
        assert time.monotonic() < deadline, f"no {ROOT_CA} in {name}"
        time.sleep(0.05)
    return name


def cms(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/configmaps"


def create(c: Cluster, ns: str, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    body = {"metadata": {"name": name, "labels": labels or {}}, "data": {"k": "v0"}}
    answer = raw_request(c, "POST", cms(ns), body)
    assert answer.status == 201, answer.body
    created: dict[str, Any] = answer.json()
    return created


def patch(c: Cluster, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = raw_request(c, "PATCH", f"{cms(ns)}/{name}", body, content_type="application/merge-patch+json")
    assert answer.status == 200, answer.body
    patched: dict[str, Any] = answer.json()
    return patched


def delete(c: Cluster, ns: str, name: str) -> None:
    answer = raw_request(c, "DELETE", f"{cms(ns)}/{name}")
    assert answer.status == 200, answer.body


def list_rv(c: Cluster, ns: str) -> str:
    answer = raw_request(c, "GET", cms(ns))
    assert answer.status == 200, answer.body
    return str(answer.json()["metadata"]["resourceVersion"])


def watch(c: Cluster, ns: str, **query: str) -> RawWatch:
    query.setdefault("fieldSelector", f"metadata.name!={ROOT_CA}")
    return RawWatch(c, f"{cms(ns)}?{urlencode({'watch': 'true', **query})}")


def summary(event: dict[str, Any] | None) -> tuple[str, str]:
    assert event is not None, "the watch closed early"
    return event["type"], event["object"]["metadata"].get("name", "")


def rv_of(event: dict[str, Any]) -> int:
    return int(event["object"]["metadata"]["resourceVersion"])


@pytest.mark.parametrize("start", [None, "0"], ids=["no-rv", "rv-0"])
def test_watch_without_rv_sends_existing_objects_then_live_events(wc: Cluster, start: str | None) -> None:
    ns = namespace(wc, f"w-initial-{start or 'none'}")
    existing = {o["metadata"]["name"]: o for o in (create(wc, ns, "a"), create(wc, ns, "b"))}
    query = {"resourceVersion": start} if start is not None else {}
    with watch(wc, ns, **query) as stream:
        initial = [stream.next_event(), stream.next_event()]
        assert sorted(summary(e) for e in initial) == [("ADDED", "a"), ("ADDED", "b")]
        for event in initial:
            assert event is not None
            name = event["object"]["metadata"]["name"]
            assert event["object"]["metadata"]["resourceVersion"] == existing[name]["metadata"]["resourceVersion"]
            assert event["object"]["data"] == {"k": "v0"}
        create(wc, ns, "c")
        assert summary(stream.next_event()) == ("ADDED", "c")
        patched = patch(wc, ns, "a", {"data": {"k": "v1"}})
        event = stream.next_event()
        assert summary(event) == ("MODIFIED", "a")
        assert event is not None and event["object"]["data"] == {"k": "v1"}
        assert event["object"]["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
        delete(wc, ns, "b")
        assert summary(stream.next_event()) == ("DELETED", "b")


def test_resume_replays_events_after_the_rv_in_order(wc: Cluster) -> None:
    ns = namespace(wc, "w-resume")
    first = create(wc, ns, "x")
    patch(wc, ns, "x", {"data": {"k": "v1"}})
    create(wc, ns, "y")
    delete(wc, ns, "x")
    with watch(wc, ns, resourceVersion=first["metadata"]["resourceVersion"]) as stream:
        replayed = [stream.next_event() for _ in range(3)]
        assert [summary(e) for e in replayed] == [("MODIFIED", "x"), ("ADDED", "y"), ("DELETED", "x")]
        rvs = [rv_of(e) for e in replayed if e is not None]
        assert rvs == sorted(rvs) and len(set(rvs)) == 3
        assert rvs[0] > int(first["metadata"]["resourceVersion"])
        live = create(wc, ns, "z")
        event = stream.next_event()
        assert summary(event) == ("ADDED", "z"), "nothing before the RV, nothing twice, then live events"
        assert event is not None and rv_of(event) == int(live["metadata"]["resourceVersion"])


def test_too_old_rv_gets_an_error_event_with_410_expired(wc: Cluster) -> None:
    ns = namespace(wc, "w-expired")
    old = create(wc, ns, "aged")["metadata"]["resourceVersion"]
    for round_ in range(HISTORY + 5):
        patch(wc, ns, "aged", {"data": {"k": str(round_)}})
    recent = list_rv(wc, ns)
    with watch(wc, ns, resourceVersion=old) as stream:
        assert stream.response.status == 200
        event = stream.next_event()
        assert event is not None and event["type"] == "ERROR", event
        status = event["object"]
        assert (status["kind"], status["apiVersion"], status["status"]) == ("Status", "v1", "Failure")
        assert (status["code"], status["reason"]) == (410, "Expired")
        assert status["message"].startswith(f"too old resource version: {old} (")
        assert stream.next_event() is None, "the stream ends after the ERROR event"
    with watch(wc, ns, resourceVersion=recent) as control:
        patch(wc, ns, "aged", {"data": {"k": "after"}})
        assert summary(control.next_event()) == ("MODIFIED", "aged")


def test_idle_watch_gets_bookmarks_only_when_allowed(wc: Cluster) -> None:
    ns = namespace(wc, "w-bookmarks")
    create(wc, ns, "quiet")
    start = list_rv(wc, ns)
    with watch(wc, ns, resourceVersion=start, allowWatchBookmarks="true") as stream:
        for _ in range(2):
            event = stream.next_event(timeout=5)
            assert event is not None and event["type"] == "BOOKMARK", event
            assert event["object"]["kind"] == "ConfigMap" and event["object"]["apiVersion"] == "v1"
            assert int(event["object"]["metadata"]["resourceVersion"]) >= int(start)
    with watch(wc, ns, resourceVersion=start) as plain:
        assert plain.silent_for(2.5), f"bookmarks were sent without allowWatchBookmarks: {plain.lines!r}"


def test_label_selector_moves_objects_in_and_out(wc: Cluster) -> None:
    ns = namespace(wc, "w-labels")
    with watch(wc, ns, resourceVersion=list_rv(wc, ns), labelSelector="app=web") as stream:
        create(wc, ns, "a", {"app": "web"})
        create(wc, ns, "b", {"app": "db"})  # never matches: must not be seen
        patch(wc, ns, "b", {"metadata": {"labels": {"app": "web"}}})
        relabelled = patch(wc, ns, "a", {"metadata": {"labels": {"app": "db"}}})
        patch(wc, ns, "a", {"data": {"k": "hidden"}})  # out of the selector: not seen
        patch(wc, ns, "b", {"data": {"k": "v1"}})
        delete(wc, ns, "a")  # out of the selector: not seen
        delete(wc, ns, "b")
        events = [stream.next_event() for _ in range(5)]
        seen = [summary(e) for e in events]
        assert seen == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b"), ("DELETED", "b")]
        moved_out = events[2]
        assert moved_out is not None and moved_out["object"]["metadata"]["labels"] == {"app": "web"}, \
            "like kube, the DELETED of an object leaving the selector carries its last matching content"
        assert rv_of(moved_out) == int(relabelled["metadata"]["resourceVersion"])
        assert stream.silent_for(0.5), f"unexpected extra events: {stream.lines[5:]!r}"


def test_field_selector_filters_by_name(wc: Cluster) -> None:
    ns = namespace(wc, "w-fields")
    with watch(wc, ns, resourceVersion=list_rv(wc, ns), fieldSelector="metadata.name=target") as stream:
        create(wc, ns, "other")
        create(wc, ns, "target")
        patch(wc, ns, "other", {"data": {"k": "v1"}})
        patch(wc, ns, "target", {"data": {"k": "v1"}})
        delete(wc, ns, "other")
        delete(wc, ns, "target")
        seen = [summary(stream.next_event()) for _ in range(3)]
        assert seen == [("ADDED", "target"), ("MODIFIED", "target"), ("DELETED", "target")]
        assert stream.silent_for(0.5), f"unexpected extra events: {stream.lines[3:]!r}"


def test_timeout_seconds_closes_the_stream_on_time(wc: Cluster) -> None:
    ns = namespace(wc, "w-timeout")
    started = time.monotonic()
    with watch(wc, ns, resourceVersion=list_rv(wc, ns), timeoutSeconds="2") as stream:
        assert stream.next_event(timeout=6) is None
    elapsed = time.monotonic() - started
    assert 1.5 <= elapsed <= 4.0, f"closed after {elapsed:.2f}s instead of about 2s"


def test_send_initial_events_ends_with_the_initial_events_end_bookmark(wc: Cluster) -> None:
    ns = namespace(wc, "w-watchlist")
    made = [create(wc, ns, name) for name in ("one", "two", "three")]
    query = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true",
             "timeoutSeconds": "30"}
    with watch(wc, ns, **query) as stream:
        initial = [stream.next_event() for _ in made]
        assert sorted(summary(e) for e in initial) == [("ADDED", "one"), ("ADDED", "three"), ("ADDED", "two")]
        marker = stream.next_event()
        assert marker is not None and marker["type"] == "BOOKMARK", marker
        assert marker["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert int(marker["object"]["metadata"]["resourceVersion"]) >= max(
            int(o["metadata"]["resourceVersion"]) for o in made)
        create(wc, ns, "four")
        event = stream.next_event()
        while event is not None and event["type"] == "BOOKMARK":  # idle bookmarks may come first
            event = stream.next_event()
        assert summary(event) == ("ADDED", "four")


def test_send_initial_events_without_not_older_than_is_rejected(wc: Cluster) -> None:
    answer = raw_request(wc, "GET", f"{cms('default')}?watch=true&sendInitialEvents=true")
    assert answer.status == 422
    body = answer.json()
    assert (body["kind"], body["code"], body["reason"]) == ("Status", 422, "Invalid")
    assert "sendInitialEvents" in body["message"]


def test_events_are_single_json_lines_flushed_as_they_happen(wc: Cluster) -> None:
    ns = namespace(wc, "w-flush")
    with watch(wc, ns, resourceVersion=list_rv(wc, ns)) as stream:
        assert stream.response.status == 200
        assert stream.response.getheader("Content-Type", "").startswith("application/json")
        assert stream.response.getheader("Transfer-Encoding", "") == "chunked"
        for index in range(3):
            create(wc, ns, f"cm-{index}")
            # each event must arrive before the next write exists: flushed per event
            assert summary(stream.next_event(timeout=5)) == ("ADDED", f"cm-{index}")
        assert len(stream.lines) == 3
        assert all(line.count(b"\n") == 1 and line.endswith(b"\n") for line in stream.lines)
