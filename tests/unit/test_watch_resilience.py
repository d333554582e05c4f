"""Issue 13 item 4: one big object must not kill a watch, and no background task dies unnoticed.

Watch streams are split into lines by the client itself (aiohttp's line reader fails on lines over
512 KiB, and a 700 KB ConfigMap is valid in Kubernetes), up to twice the API server's largest object;
:func:`hybrid_operator.kube.informer.follow` survives anything -- an error, a crash in a handler --
logging it, restarting with a backoff and reporting a crash to ``/readyz`` until the kind is listed
again; the operator's own background tasks are supervised the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hybrid_operator import errors
from hybrid_operator.kube import informer
from hybrid_operator.kube.client import MAX_WATCH_LINE, ResourceRef, json_lines
from hybrid_operator.manager.health import Readiness
from support.fakes import settle

pytestmark = pytest.mark.unit

REF = ResourceRef("", "v1", "ConfigMap", "configmaps", True, False)
real_sleep = asyncio.sleep


async def stream(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def lines(*chunks: bytes, limit: int = MAX_WATCH_LINE) -> list[bytes]:
    return [line async for line in json_lines(stream(*chunks), limit, "watch of ConfigMap")]


async def test_a_700_kb_event_is_one_line() -> None:
    big = b'{"type":"ADDED","object":{"data":{"d":"' + b"x" * 700_000 + b'"}}}'
    pieces = [big[i:i + 65536] for i in range(0, len(big), 65536)]
    assert await lines(b'{"a":1}\n', *pieces, b"\n", b'{"b":2}\n') == [b'{"a":1}', big, b'{"b":2}']


async def test_lines_split_anywhere_and_blank_lines_are_skipped() -> None:
    assert await lines(b'{"a"', b":1}\n\n", b'{"b":2}') == [b'{"a":1}', b'{"b":2}']


async def test_a_line_longer_than_any_object_ends_the_stream_with_an_error() -> None:
    with pytest.raises(errors.TemporaryError, match="longer than 100 bytes"):
        await lines(b"y" * 60, b"y" * 60, b"\n", limit=100)


class FlakyCluster:
    """resolve/list work; the first watches fail as scripted, later ones stay open (no events)."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.watches = 0
        self.lists = 0

    def resolve(self, group: str, version: str, kind: str) -> ResourceRef:
        return REF

    def list_with_version(self, ref: ResourceRef, namespace: str = "") -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        return [{"metadata": {"name": "c", "namespace": "ns"}}], "1"

    async def watch(self, ref: ResourceRef, namespace: str, resource_version: str,
                    timeout_seconds: int = 300, shard_selector: str = "") -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        if self.failures:
            raise self.failures.pop(0)
        yield {"type": "MODIFIED", "object": {"metadata": {"name": "c", "namespace": "ns"}}}
        await asyncio.Event().wait()


class Handler:
    def __init__(self, crash_on_change: int = 0) -> None:
        self.crashes = crash_on_change
        self.changed_seen = 0

    def listed(self, ref: ResourceRef, obj: dict[str, Any]) -> None:
        pass

    def changed(self, ref: ResourceRef, event_type: str, obj: dict[str, Any]) -> None:
        if self.crashes:
            self.crashes -= 1
            raise KeyError("a bug in a handler")
        self.changed_seen += 1


class Sleeps:
    """Replaces asyncio.sleep in the informer: no real time passes, the delays are recorded."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await real_sleep(0)


async def follow(cluster: FlakyCluster, handler: Handler, health: Readiness, monkeypatch: pytest.MonkeyPatch,
                 until: Any) -> Sleeps:
    sleeps = Sleeps()
    monkeypatch.setattr(informer.asyncio, "sleep", sleeps)
    task = asyncio.create_task(informer.follow(cluster, ("", "v1", "ConfigMap"), (), handler,  # type: ignore[arg-type]
                                               what="dependents /v1/ConfigMap", health=health))
    for _ in range(1000):  # resolve and list run in threads: real time passes
        if until():
            break
        await real_sleep(0.01)
    await settle()
    assert not task.done(), "the follower never ends by itself"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return sleeps


async def test_a_crash_is_logged_restarted_with_backoff_and_shown_until_the_kind_is_listed_again(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    cluster = FlakyCluster()
    handler = Handler(crash_on_change=2)
    health = Readiness(["Memcached"])
    reported: list[tuple[str, str]] = []
    original = health.task_failed

    def spy(name: str, error: str) -> None:
        reported.append((name, error))
        original(name, error)

    health.task_failed = spy  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="hybrid_operator.kube.informer"):
        sleeps = await follow(cluster, handler, health, monkeypatch, lambda: handler.changed_seen)
    assert handler.changed_seen == 1, "the third watch delivered the event"
    assert sleeps.delays[:2] == [1.0, 2.0], "exponential backoff between restarts"
    assert [name for name, _ in reported] == ["dependents /v1/ConfigMap"] * 2
    assert "KeyError" in reported[0][1]
    crashes = [r for r in caplog.records if r.getMessage() == "watch crashed"]
    assert len(crashes) == 2 and crashes[0].exc_info is not None, "logged with the traceback"
    assert any(r.getMessage() == "watch resumed" for r in caplog.records)
    assert ("task-dependents /v1/ConfigMap", True, "") in health.checks(), "listed again: ready again"


async def test_an_error_mid_stream_is_retried_and_logged_once(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    cluster = FlakyCluster(*(errors.TemporaryError("watch of ConfigMap answered 500") for _ in range(3)))
    health = Readiness(["Memcached"])
    with caplog.at_level(logging.WARNING, logger="hybrid_operator.kube.informer"):
        handler = Handler()
        await follow(cluster, handler, health, monkeypatch, lambda: handler.changed_seen)
    assert cluster.watches == 4 and cluster.lists == 4
    assert [r.getMessage() for r in caplog.records] == ["watch failed"], "once per streak"
    assert all(name != "task-dependents /v1/ConfigMap" or ok for name, ok, _ in health.checks())


def test_readyz_shows_a_crashed_task_until_it_works_again() -> None:
    health = Readiness(["Memcached"])
    health.started = True
    health.alive("Memcached")
    assert health.ready()
    health.task_failed("dependents /v1/ConfigMap", "crashed (LineTooLong: ...); restarting in 4s")
    assert not health.ready()
    assert ("task-dependents /v1/ConfigMap", False, "crashed (LineTooLong: ...); restarting in 4s") \
        in health.checks()
    health.task_ok("dependents /v1/ConfigMap")
    assert health.ready()


class SyncHandler(Handler):
    """A handler that also hears when its view of a scope is complete, and when it is not."""

    def __init__(self) -> None:
        super().__init__()
        self.hooks: list[str] = []

    def relisting(self, ref: ResourceRef, namespace: str) -> None:
        self.hooks.append(f"relisting {namespace or '*'}")

    def synced(self, ref: ResourceRef, namespace: str) -> None:
        self.hooks.append(f"synced {namespace or '*'}")

    def interrupted(self) -> None:
        self.hooks.append("interrupted")


async def test_a_sync_aware_handler_hears_each_list_and_each_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FlakyCluster(errors.TemporaryError("watch of ConfigMap answered 500"))
    handler = SyncHandler()
    await follow(cluster, handler, Readiness(["Memcached"]), monkeypatch, lambda: handler.changed_seen)
    assert handler.hooks == ["relisting *", "synced *", "interrupted", "relisting *", "synced *", "interrupted"], \
        "a failed watch and the final cancellation both make the view incomplete"


class ServerEndedCluster(FlakyCluster):
    """The first watch ends as the server ends watches (after an event and a bookmark), the second is
    answered 410 Expired, the third stays open."""

    def __init__(self) -> None:
        super().__init__()
        self.versions: list[str] = []

    async def watch(self, ref: ResourceRef, namespace: str, resource_version: str,
                    timeout_seconds: int = 300, shard_selector: str = "") -> AsyncIterator[dict[str, Any]]:
        self.versions.append(resource_version)
        if len(self.versions) == 1:
            yield {"type": "MODIFIED", "object": {"metadata": {"name": "c", "namespace": "ns", "resourceVersion": "7"}}}
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}
            return
        if len(self.versions) == 2:
            yield {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
            return
        await asyncio.Event().wait()
        yield {}


async def test_a_watch_the_server_ended_resumes_from_the_last_version_and_lists_again_only_when_expired(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    cluster = ServerEndedCluster()
    handler = SyncHandler()
    with caplog.at_level(logging.WARNING, logger="hybrid_operator.kube.informer"):
        sleeps = await follow(cluster, handler, Readiness(["Memcached"]), monkeypatch,
                              lambda: len(cluster.versions) == 3)
    assert cluster.versions == ["1", "9", "1"], "resumed from the bookmark's version; listed again after 410"
    assert cluster.lists == 2
    assert handler.changed_seen == 1
    assert handler.hooks == ["relisting *", "synced *", "relisting *", "synced *", "interrupted"]
    assert [delay for delay in sleeps.delays if delay] == [], "neither is a failure: no backoff"
    assert caplog.records == [], "and no warning"


class InstantlyEndedCluster(FlakyCluster):
    """Every watch ends the moment it is opened, without an event (a proxy that cuts watches, say)."""

    async def watch(self, ref: ResourceRef, namespace: str, resource_version: str,
                    timeout_seconds: int = 300, shard_selector: str = "") -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        return
        yield {}


async def test_a_watch_ended_at_once_without_an_event_is_retried_with_the_backoff_not_in_a_tight_loop(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    cluster = InstantlyEndedCluster()
    handler = SyncHandler()
    with caplog.at_level(logging.WARNING, logger="hybrid_operator.kube.informer"):
        sleeps = await follow(cluster, handler, Readiness(["Memcached"]), monkeypatch, lambda: cluster.watches >= 4)
    assert sleeps.delays[:3] == [1.0, 2.0, 4.0], "each watch ended at once is followed by a longer wait"
    assert cluster.lists >= 4, "and lists again, as after any failure"
    assert [record.getMessage() for record in caplog.records] == ["watch failed"], "one warning per streak"


class FailsWhenTold(FlakyCluster):
    """Every watch stays open until ``fail`` is set, then fails."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = asyncio.Event()

    async def watch(self, ref: ResourceRef, namespace: str, resource_version: str,
                    timeout_seconds: int = 300, shard_selector: str = "") -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        await self.fail.wait()
        raise errors.TemporaryError("watch of ConfigMap answered 500")
        yield {}


async def test_a_cancel_that_meets_a_failing_watch_still_stops_the_follower() -> None:
    # asyncio.TaskGroup gives a child's error priority over the cancellation of its parent: the
    # follower saw a TemporaryError, retried, and ran on after shutdown or a shard hand-over.
    cluster = FailsWhenTold()
    task = asyncio.create_task(informer.follow(cluster, ("", "v1", "ConfigMap"), (), Handler(),  # type: ignore[arg-type]
                                               what="dependents /v1/ConfigMap"))
    for _ in range(500):  # resolve and list run in threads: real time passes
        if cluster.watches:
            break
        await real_sleep(0.01)
    assert cluster.watches == 1
    cluster.fail.set()
    task.cancel()  # in the same step: the watch fails while the cancellation is delivered
    done, _ = await asyncio.wait([task], timeout=5)
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert done and task.cancelled(), "the follower is cancelled, not retrying the failed watch"
    assert cluster.watches == 1
