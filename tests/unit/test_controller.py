"""Unit tests for the controller layer: the event filter (predicates) and the Controller's queueing.

The Controller runs with a FakeReconciler (scripted outcomes) and a FakeClock: events become keys,
failures back off, successes requeue after the period, and a burst of events never multiplies the
resync chain (the timer pile-up of issue 13).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind
from hybrid_operator.controller import dependents, predicates
from hybrid_operator.controller.controller import Controller
from hybrid_operator.controller.reconcile import Outcome
from support.fakes import FakeClock, FakeReconciler, settle

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")
KEY = ("ns", "m")


def body(generation: int | None = 1, *, annotations: dict[str, str] | None = None,
         deleting: bool = False, name: str = "m") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "annotations": annotations or {}}
    if generation is not None:
        meta["generation"] = generation
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": meta}


# -- predicates -----------------------------------------------------------------------------------

SEEN = predicates.seen(body(1, annotations={"a": "1"}))


@pytest.mark.parametrize(("previous", "current", "event", "watch_annotations", "expected"), [
    pytest.param(None, body(1), "ADDED", False, True, id="first sight"),
    pytest.param(None, body(1), "MODIFIED", False, True, id="first sight of a modified object"),
    pytest.param(SEEN, body(1, annotations={"a": "1"}), "MODIFIED", False, False, id="status-only update"),
    pytest.param(SEEN, body(2, annotations={"a": "1"}), "MODIFIED", False, True, id="generation change"),
    pytest.param(SEEN, body(None), "MODIFIED", False, True, id="no generation"),
    pytest.param(SEEN, body(1, annotations={"a": "1"}, deleting=True), "MODIFIED", False, True,
                 id="deletion starts"),
    pytest.param(SEEN, body(1, annotations={"a": "1"}), "DELETED", False, True, id="deleted"),
    pytest.param(SEEN, body(1, annotations={"a": "2"}), "MODIFIED", False, False,
                 id="annotations without watchAnnotationsChanges"),
    pytest.param(SEEN, body(1, annotations={"a": "2"}), "MODIFIED", True, True,
                 id="annotations with watchAnnotationsChanges"),
    pytest.param(SEEN, body(1, annotations={"a": "1", "kopf.zalando.org/last-handled": "x"}), "MODIFIED", True,
                 False, id="kopf bookkeeping annotations are not changes"),
    pytest.param(SEEN, body(1, annotations={"a": "1", dependents.DEPENDENT_KINDS_ANNOTATION: "v1/Service"}),
                 "MODIFIED", True, False, id="our dependent-kinds annotation is not a change"),
])
def test_wants_reconcile(previous: predicates.Seen | None, current: dict[str, Any], event: str,
                         watch_annotations: bool, expected: bool) -> None:
    assert predicates.wants_reconcile(previous, predicates.seen(current), event, watch_annotations) is expected


# -- the Controller -------------------------------------------------------------------------------


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=0.0)


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., Controller]]:
    made: list[Controller] = []

    def make_controller(reconciler: FakeReconciler, clock: FakeClock, *, workers: int = 2,
                        watch_annotations: bool = False) -> Controller:
        watch = AnsibleWatch(gvk=GVK, playbook=Path("/nowhere/playbook.yml"),
                             watch_annotations_changes=watch_annotations)
        controller = Controller(watch=watch, reconciler=reconciler, workers=workers, clock=clock)
        made.append(controller)
        return controller

    yield make_controller
    for controller in made:
        await controller.close()


async def test_events_become_one_queued_key_until_the_workers_start(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(default=Outcome())
    controller = make(reconciler, clock)
    await controller.on_event("ADDED", body(1))
    await controller.on_event("MODIFIED", body(2))
    await controller.on_event("MODIFIED", body(2))  # filtered: nothing changed
    await controller.on_event("ADDED", body(1, name="other"))
    assert controller.queue.depth() == 2
    controller.start()
    await settle()
    assert sorted(reconciler.calls) == [("ns", "m"), ("ns", "other")]
    assert controller.idle.is_set() and controller.in_flight == 0


async def test_a_status_only_update_does_not_reconcile(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(default=Outcome())
    controller = make(reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", body(1))
    await settle()
    await controller.on_event("MODIFIED", body(1))
    await settle()
    assert reconciler.calls == [KEY]


async def test_annotation_changes_reconcile_only_when_watched(clock: FakeClock, make) -> None:
    for watched, expected in ((False, 1), (True, 2)):
        reconciler = FakeReconciler(default=Outcome())
        controller = make(reconciler, clock, watch_annotations=watched)
        controller.start()
        await controller.on_event("ADDED", body(1, annotations={"a": "1"}))
        await settle()
        await controller.on_event("MODIFIED", body(1, annotations={"a": "2"}))
        await settle()
        assert len(reconciler.calls) == expected, f"watchAnnotationsChanges={watched}"


async def test_success_requeues_after_the_period(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(default=Outcome(requeue_after=30.0), clock=clock)
    controller = make(reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", body(1))
    await settle()
    assert controller.queue.pending(KEY) == 30.0
    await clock.advance(90)
    assert reconciler.times == [0.0, 30.0, 60.0, 90.0]


async def test_success_without_a_period_is_not_requeued(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(default=Outcome(), clock=clock)
    controller = make(reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", body(1))
    await clock.advance(3600)
    assert reconciler.times == [0.0]
    assert controller.queue.pending(KEY) is None


async def test_failures_back_off_doubling_and_a_success_resets_it(clock: FakeClock, make) -> None:
    failed = Outcome(failed=True)
    reconciler = FakeReconciler(failed, failed, failed, Outcome(), failed, default=Outcome(), clock=clock)
    controller = make(reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", body(1))
    await clock.advance(6.5)                  # retries at 1 and 3 (+1, +2), the third failure waits 4 s
    assert reconciler.times == [0.0, 1.0, 3.0]
    assert controller.queue.pending(KEY) == 7.0
    await clock.advance(0.5)
    assert reconciler.times == [0.0, 1.0, 3.0, 7.0]
    assert controller.queue.num_requeues(KEY) == 0, "the success forgot the failures"
    await controller.on_event("MODIFIED", body(2))   # fails again: back to the base delay
    await settle()
    assert controller.queue.pending(KEY) == 8.0


async def test_a_crashing_reconcile_backs_off_like_a_failure(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(RuntimeError("boom"), default=Outcome(), clock=clock)
    controller = make(reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", body(1))
    await settle()
    assert controller.queue.pending(KEY) == 1.0


async def test_a_retry_after_hint_is_used_as_is_and_not_counted(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(Outcome(failed=True, retry_after=5.0), default=Outcome(), clock=clock)
    controller = make(reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", body(1))
    await settle()
    assert controller.queue.pending(KEY) == 5.0
    assert controller.queue.num_requeues(KEY) == 0


async def test_the_default_backoff_is_one_second_doubling_to_five_minutes(clock: FakeClock, make) -> None:
    controller = make(FakeReconciler(default=Outcome()), clock)
    assert (controller.backoff.base, controller.backoff.cap) == (1.0, 300.0)
    assert controller.queue.rate_limiter is controller.backoff


async def test_an_event_during_a_backoff_reconciles_at_once(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(Outcome(failed=True), default=Outcome(), clock=clock)
    controller = make(reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", body(1))
    await clock.advance(0.5)
    await controller.on_event("MODIFIED", body(2))   # a spec change: look now, not in 0.5 s
    await clock.advance(5)
    assert reconciler.times == [0.0, 0.5]


async def test_draining_skips_queued_keys(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(default=Outcome())
    controller = make(reconciler, clock)
    await controller.on_event("ADDED", body(1))
    controller.draining = True
    controller.start()
    await settle()
    assert reconciler.calls == []
    assert controller.queue.depth() == 0 and controller.idle.is_set()


async def test_losing_leadership_queues_every_known_object_again(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(default=Outcome(requeue_after=60.0))
    controller = make(reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", body(1))
    await controller.on_event("ADDED", body(1, name="other"))
    await settle()
    await controller.stop_now()
    assert controller.queue.depth() == 2 and not controller.running
    assert controller.queue.rate_limiter is controller.backoff


async def test_a_deleted_object_is_forgotten_by_the_filter(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(default=Outcome())
    controller = make(reconciler, clock)
    await controller.on_event("ADDED", body(1))
    await controller.on_event("DELETED", body(1))
    assert KEY not in controller.seen
    assert controller.queue.depth() == 1


async def test_a_burst_of_events_does_not_multiply_the_resync_chain(clock: FakeClock, make) -> None:
    """Issue 13 item 1: period 0.5 s, five events 0.1 s apart, 3 s: one chain, not five.

    Timeline (reconciles take no time here): events at 0.0-0.4 reconcile at once, each moving the
    one pending resync to +0.5; then resyncs at 0.9, 1.4, 1.9, 2.4, 2.9.  Every timer kept (the old
    queue) would give five chains: over 30 reconciles.
    """
    reconciler = FakeReconciler(default=Outcome(requeue_after=0.5), clock=clock)
    controller = make(reconciler, clock)
    controller.start()
    for generation in range(1, 6):
        await controller.on_event("MODIFIED", body(generation))
        await clock.advance(0.1)
    await clock.advance(3.0 - 0.5)
    assert reconciler.times == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.9, 1.4, 1.9, 2.4, 2.9])
    assert controller.queue.waiting() == 1


async def test_many_objects_each_keep_one_resync_chain(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(default=Outcome(requeue_after=1.0), clock=clock)
    controller = make(reconciler, clock, workers=3)
    controller.start()
    for round_ in range(3):
        for index in range(20):
            await controller.on_event("MODIFIED", body(round_ + 1, name=f"cr{index}"))
        await clock.advance(0.25)
    await clock.advance(10)
    per_key: dict[tuple[str, str], int] = {}
    for key in reconciler.calls:
        per_key[key] = per_key.get(key, 0) + 1
    assert len(per_key) == 20
    assert max(per_key.values()) <= 3 + 11, per_key      # 3 events + one resync per second
    assert controller.queue.waiting() == 20

