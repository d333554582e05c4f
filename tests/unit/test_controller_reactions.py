"""What starts a reconcile, and what does not (issue 14, gaps 7, 8 and 12).

* the operator's own writes (status, finalizers, its bookkeeping ConfigMap) never start a run, even
  for a primary without a generation (a core Secret watched as a primary), and even when their
  watch event arrives while the reconcile that wrote them still runs;
* Helm kinds react to annotation and label changes (the SDK's Helm controller has no predicate),
  including a CR waiting in backoff;
* a failed reconcile that an event brings back at once is not logged as ``retry_in=300``;
* the dependent kinds are kept in a ConfigMap of ours, never as an annotation on the users' objects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.reconciler import AnsibleReconciler
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind, HelmWatch, Watch
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller import dependents, predicates
from hybrid_operator.controller.controller import Controller
from hybrid_operator.controller.reconcile import Outcome, OwnWrites
from support.fakes import FakeClock, FakeCluster, FakeReconciler, FakeRunner, settle, succeeded

pytestmark = pytest.mark.unit

SECRET = GroupVersionKind("", "v1", "Secret")
HELM = GroupVersionKind("cache.example.com", "v1alpha1", "Nginx")
KEY = ("ns", "s")


def secret(rv: str, *, labels: dict[str, str] | None = None, data: str = "a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "data": {"k": data},
            "metadata": {"name": "s", "namespace": "ns", "resourceVersion": rv, "labels": labels or {}}}


def nginx(rv: str, *, generation: int = 1, annotations: dict[str, str] | None = None,
          labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": HELM.api_version, "kind": HELM.kind,
            "metadata": {"name": "s", "namespace": "ns", "resourceVersion": rv, "generation": generation,
                         "annotations": annotations or {}, "labels": labels or {}}}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=0.0)


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., Controller]]:
    made: list[Controller] = []

    def make_controller(watch: Watch, reconciler: Any, clock: FakeClock, own: OwnWrites | None = None) -> Controller:
        controller = Controller(watch=watch, reconciler=reconciler, workers=1, clock=clock,
                                own_writes=own or OwnWrites())
        made.append(controller)
        return controller

    yield make_controller
    for controller in made:
        await controller.close()


class WritingReconciler:
    """Writes the object (as a reconciler writes status or a finalizer), with the watch event of that
    write delivered *before* the write's answer comes back -- the race the controller must handle."""

    def __init__(self, own: OwnWrites, deliver: Callable[[dict[str, Any]], Any]) -> None:
        self.own = own
        self.deliver = deliver
        self.calls = 0

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        self.calls += 1
        written = secret(f"w{self.calls}", data="written")
        await self.deliver(written)  # the watch is faster than the answer
        self.own.record(written)
        return Outcome()


async def test_the_operators_own_write_never_starts_a_run(clock: FakeClock, make) -> None:
    own = OwnWrites()
    watch = AnsibleWatch(gvk=SECRET, playbook=Path("/p.yml"), manage_status=False)
    controller: Controller | None = None

    async def deliver(obj: dict[str, Any]) -> None:
        assert controller is not None
        await controller.on_event("MODIFIED", obj)

    reconciler = WritingReconciler(own, deliver)
    controller = make(watch, reconciler, clock, own)
    controller.start()
    await controller.on_event("ADDED", secret("1"))
    await settle()
    assert reconciler.calls == 1, "the event of our own write (no generation) started another run"

    # a late echo of the same write, after the reconcile ended, starts nothing either
    await controller.on_event("MODIFIED", secret("w1", data="written"))
    await settle()
    assert reconciler.calls == 1

    # someone else's write does
    await controller.on_event("MODIFIED", secret("2", data="theirs"))
    await settle()
    assert reconciler.calls == 2


async def test_someone_elses_write_during_a_run_still_counts(clock: FakeClock, make) -> None:
    own = OwnWrites()
    watch = AnsibleWatch(gvk=SECRET, playbook=Path("/p.yml"), manage_status=False)
    controller: Controller | None = None

    async def deliver(obj: dict[str, Any]) -> None:
        assert controller is not None
        if reconciler.calls == 1:
            await controller.on_event("MODIFIED", secret("x", data="theirs"))  # a user edits it meanwhile
        await controller.on_event("MODIFIED", obj)

    reconciler = WritingReconciler(own, deliver)
    controller = make(watch, reconciler, clock, own)
    controller.start()
    await controller.on_event("ADDED", secret("1"))
    await settle()
    assert reconciler.calls == 2


async def test_ansible_status_and_finalizer_writes_are_recorded_as_own(tmp_path: Path) -> None:
    """A Secret watched as a primary (manageStatus true): every write the reconciler makes is known."""
    cluster = FakeCluster()
    cluster.add_kind("", "v1", "Secret", "secrets", has_status=False)
    cluster.create(secret("1"))
    own = OwnWrites()
    watch = AnsibleWatch(gvk=SECRET, playbook=Path("/p.yml"))
    reconciler = AnsibleReconciler(watch, cluster, FakeRunner(succeeded(ok=1)), Settings(artifacts_dir=tmp_path),
                                   asyncio.Semaphore(1), tmp_path / "kubeconfig", {}, own_writes=own)
    await reconciler.reconcile("ns", "s")
    stored = cluster.stored("Secret", "ns", "s")
    assert stored is not None and own.is_own(stored)
    assert cluster.writes, "the reconciler wrote the status"


@pytest.mark.parametrize(("change", "expected"), [
    ({"annotations": {"helm.sdk.operatorframework.io/uninstall-wait": "true"}}, 2),
    ({"labels": {"team": "b"}}, 2),
    ({}, 1),
])
async def test_helm_kinds_react_to_annotation_and_label_changes(clock: FakeClock, make, change: dict[str, Any],
                                                               expected: int) -> None:
    reconciler = FakeReconciler(default=Outcome())
    controller = make(HelmWatch(gvk=HELM, chart=Path("/chart")), reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", nginx("1"))
    await settle()
    await controller.on_event("MODIFIED", nginx("2", **change))
    await settle()
    assert len(reconciler.calls) == expected


async def test_a_helm_cr_in_backoff_is_retried_when_its_annotations_change(clock: FakeClock, make) -> None:
    reconciler = FakeReconciler(Outcome(failed=True), Outcome(failed=True), Outcome(failed=True),
                                default=Outcome(), clock=clock)
    controller = make(HelmWatch(gvk=HELM, chart=Path("/chart")), reconciler, clock)
    controller.start()
    await controller.on_event("ADDED", nginx("1"))
    await clock.advance(3.5)  # failures at 0, 1, 3: the next retry is 4 s away
    assert reconciler.times == [0.0, 1.0, 3.0]
    await clock.advance(0.5)
    forced = nginx("2", annotations={"helm.sdk.operatorframework.io/upgrade-force": "true"})
    await controller.on_event("MODIFIED", forced)
    await settle()
    assert reconciler.times == [0.0, 1.0, 3.0, 4.0], "the annotation change retried it at once"


def test_ansible_kinds_keep_the_sdks_predicate() -> None:
    watch = AnsibleWatch(gvk=HELM, playbook=Path("/p.yml"))
    previous = predicates.seen(nginx("1"))
    relabelled = predicates.seen(nginx("2", labels={"a": "b"}, annotations={"x": "y"}))
    assert not predicates.wants_reconcile(previous, relabelled, "MODIFIED", predicates.metadata_changes(watch))
    helm = HelmWatch(gvk=HELM, chart=Path("/chart"))
    assert predicates.wants_reconcile(previous, relabelled, "MODIFIED", predicates.metadata_changes(helm))


async def test_a_retry_brought_forward_by_an_event_is_not_logged_as_the_backoff(
        clock: FakeClock, make, caplog: pytest.LogCaptureFixture) -> None:
    """A dependent's event arrives while the failing run goes: the CR runs again now, not in 5 minutes."""
    controller: Controller | None = None

    class Failing:
        calls = 0

        async def reconcile(self, namespace: str, name: str) -> Outcome:
            Failing.calls += 1
            assert controller is not None
            if Failing.calls == 1:
                for _ in range(9):  # earlier failures: the backoff is at its cap
                    controller.queue.rate_limiter.when(KEY)
                controller.enqueue(KEY)  # a dependent changed during the run
                return Outcome(failed=True)
            return Outcome()

    controller = make(AnsibleWatch(gvk=HELM, playbook=Path("/p.yml")), Failing(), clock)
    controller.start()
    with caplog.at_level(logging.INFO):
        await controller.on_event("ADDED", nginx("1"))
        await settle()
    [record] = [r for r in caplog.records if r.getMessage() == "reconcile will retry"]
    assert record.__dict__["retry_in"] == 0
    assert record.__dict__["backoff"] == 300.0
    assert Failing.calls == 2


# -- the dependent kinds' ConfigMap ---------------------------------------------------------------


def test_dependent_kinds_are_kept_in_our_configmap_not_on_the_owner() -> None:
    cluster = FakeCluster()
    cluster.add_kind("", "v1", "ConfigMap", "configmaps")
    own = OwnWrites()
    store = dependents.KnownKinds(cluster, "operators", "hybrid-operator-dependents", own)
    service = dependents.ChildKind("", "v1", "Service")
    deployment = dependents.ChildKind("apps", "v1", "Deployment")
    store.add(("", "Secret"), {service})
    store.add(("cache.example.com", "Memcached"), {deployment, service})
    store.add(("cache.example.com", "Memcached"), {service})  # nothing new: no write
    assert len(cluster.writes) == 2
    stored = cluster.stored("ConfigMap", "operators", "hybrid-operator-dependents")
    assert stored is not None
    assert stored["data"] == {"Secret": "/v1/Service", "Memcached.cache.example.com": "/v1/Service\napps/v1/Deployment"}
    assert own.is_own(stored), "our bookkeeping write must not start a run of a ConfigMap watch"

    restarted = dependents.KnownKinds(cluster, "operators", "hybrid-operator-dependents")
    assert restarted.load() == {"Secret": {service}, "Memcached.cache.example.com": {service, deployment}}


def test_an_unwritable_configmap_is_a_warning_not_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    from hybrid_operator import errors

    cluster = FakeCluster()
    cluster.add_kind("", "v1", "ConfigMap", "configmaps")
    cluster.fail("apply", errors.TemporaryError("forbidden"))
    store = dependents.KnownKinds(cluster, "operators", "x-dependents")
    with caplog.at_level(logging.WARNING):
        store.add(("", "Secret"), {dependents.ChildKind("", "v1", "Service")})
    assert [r for r in caplog.records if r.getMessage() == "dependent kinds not kept"]


class CancelledMidRunReconciler:
    """The first reconcile writes the Running status (recorded as our own write), then runs until it is
    cancelled (a shard handed over); later ones succeed."""

    def __init__(self, own: OwnWrites) -> None:
        self.own = own
        self.calls = 0
        self.running = asyncio.Event()

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        self.calls += 1
        if self.calls == 1:
            self.own.record(nginx("running", generation=2))
            self.running.set()
            await asyncio.Event().wait()
        return Outcome()


async def test_an_object_handed_back_after_a_cancelled_run_is_reconciled_though_we_wrote_it_last(
        clock: FakeClock, make) -> None:
    """A replica that loses a bucket mid-run and gets it back re-lists the object in the state its own
    cancelled reconcile wrote last (status Running): first sight again, not an echo, so it must run.
    (Found in an e2e run: two CRs stayed at generation 2 unreconciled after a lease was lost and regained.)"""
    own = OwnWrites()
    watch = AnsibleWatch(gvk=HELM, playbook=Path("/p.yml"))
    reconciler = CancelledMidRunReconciler(own)
    controller = make(watch, reconciler, clock, own)
    controller.start()
    await controller.on_event("MODIFIED", nginx("2", generation=2))
    await asyncio.wait_for(reconciler.running.wait(), 5)

    assert await controller.release_keys(lambda key: True, 0.0) == 1
    await settle()
    await controller.on_event("ADDED", nginx("running", generation=2))  # the re-list once the bucket is back
    await settle()
    assert reconciler.calls == 2, "the object handed back was never reconciled again"
