"""Unit tests for hybrid_operator.ansible.reconciler through a FakeRunner and a FakeCluster.

What the reconciler writes (finalizers, status patches, Events) and when, what it asks the runner
to run, and what it tells the controller — with scripted run results, no ansible-runner, no API.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.reconciler import AnsibleReconciler
from hybrid_operator.ansible.runs import FailedTask, RunResult
from hybrid_operator.config.model import AnsibleWatch, Finalizer, GroupVersionKind
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller.reconcile import Outcome
from support.fakes import FakeCluster, FakeRunner, succeeded

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")
FINALIZER = "cache.example.com/finalizer"
PERIOD = "ansible.sdk.operatorframework.io/reconcile-period"


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add_kind(GVK.group, GVK.version, GVK.kind, "memcacheds")
    return cluster


def make(cluster: FakeCluster, runner: FakeRunner, tmp_path: Path, *, finalizer: bool = True,
         period: timedelta = timedelta(minutes=10), **watch: Any) -> AnsibleReconciler:
    spec = AnsibleWatch(gvk=GVK, playbook=Path("/nowhere/playbook.yml"),
                        finalizer=Finalizer(FINALIZER, vars={"state": "absent"}) if finalizer else None, **watch)
    settings = Settings(artifacts_dir=tmp_path / "runner", reconcile_period=period)
    return AnsibleReconciler(spec, cluster, runner, settings, asyncio.Semaphore(1), tmp_path / "kubeconfig", {})


def cr(cluster: FakeCluster, *, annotations: dict[str, str] | None = None, finalizers: list[str] | None = None,
       deleting: bool = False, status: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m", "namespace": "ns", "annotations": annotations or {}}
    if finalizers:
        meta["finalizers"] = finalizers
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    obj: dict[str, Any] = {"apiVersion": GVK.api_version, "kind": GVK.kind, "metadata": meta, "spec": {"size": 2}}
    if status is not None:
        obj["status"] = status
    return cluster.create(obj)


def conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    assert obj is not None
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


def without_time(condition: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in condition.items() if k != "lastTransitionTime"}


# -- a live CR --------------------------------------------------------------------------------------


async def test_the_finalizer_is_added_before_the_run(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner(succeeded(ok=3))
    cr(cluster)
    await make(cluster, runner, tmp_path).reconcile("ns", "m")
    assert [w.verb for w in cluster.writes] == ["set_finalizer", "patch_status", "patch_status"]
    request = runner.requests[0]
    assert FINALIZER in request.cr["metadata"]["finalizers"], "the run sees the object with its finalizer"
    assert request.finalizer is False
    assert request.cr["status"]["conditions"][0]["type"] == "Running"


async def test_status_is_written_once_per_phase_in_the_sdk_shape(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner(succeeded(ok=3, changed=1, skipped=2))
    cr(cluster, finalizers=[FINALIZER])
    outcome = await make(cluster, runner, tmp_path).reconcile("ns", "m")

    running, _ = cluster.status_patches("m")
    assert [without_time(c) for c in running["status"]["conditions"]] == [
        {"type": "Running", "status": "True", "reason": "Running", "message": "Running reconciliation"}]
    stored = cluster.stored("Memcached", "ns", "m")
    found = conditions(stored)
    assert without_time(found["Running"]) == {
        "type": "Running", "status": "True", "reason": "Successful", "message": "Awaiting next reconciliation",
        "ansibleResult": {"ok": 3, "changed": 1, "skipped": 2, "failures": 0,
                          "completion": "2026-01-01T00:00:00"}}
    assert without_time(found["Successful"]) == {"type": "Successful", "status": "True", "reason": "Successful",
                                                 "message": "Last reconciliation succeeded"}
    assert without_time(found["Failure"]) == {"type": "Failure", "status": "False", "reason": "", "message": ""}
    assert stored is not None and stored["status"]["observedGeneration"] == 1
    assert cluster.reasons() == ["ReconcileSucceeded"]
    assert outcome == Outcome(requeue_after=600.0)


async def test_the_playbooks_status_is_kept_and_the_operators_conditions_win(cluster: FakeCluster,
                                                                            tmp_path: Path) -> None:
    runner = FakeRunner(succeeded(stats_data={"status": {"phase": "ready", "conditions": [
        {"type": "Custom", "status": "True"}]}}))
    cr(cluster, finalizers=[FINALIZER], status={"kept": "yes"})
    await make(cluster, runner, tmp_path).reconcile("ns", "m")
    stored = cluster.stored("Memcached", "ns", "m")
    assert stored is not None
    assert (stored["status"]["kept"], stored["status"]["phase"]) == ("yes", "ready")
    assert set(conditions(stored)) == {"Running", "Custom", "Successful", "Failure"}


async def test_requeue_after_from_the_playbook_wins_over_the_period(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner(succeeded(requeue_after=timedelta(seconds=7)))
    cr(cluster, finalizers=[FINALIZER], annotations={PERIOD: "45s"})
    assert await make(cluster, runner, tmp_path).reconcile("ns", "m") == Outcome(requeue_after=7.0)


async def test_the_period_annotation_wins_over_the_watch_and_the_flag(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner(succeeded(), succeeded())
    cr(cluster, finalizers=[FINALIZER], annotations={PERIOD: "45s"})
    reconciler = make(cluster, runner, tmp_path, reconcile_period=timedelta(seconds=90))
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=45.0)
    cluster.stored("Memcached", "ns", "m")["metadata"]["annotations"] = {}  # type: ignore[index]
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=90.0)


async def test_a_zero_period_does_not_requeue(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner(succeeded())
    cr(cluster, finalizers=[FINALIZER], annotations={PERIOD: "0s"})
    reconciler = make(cluster, runner, tmp_path, period=timedelta(0))
    assert await reconciler.reconcile("ns", "m") == Outcome()


async def test_a_failed_run_is_a_failure_condition_an_event_and_a_failed_outcome(cluster: FakeCluster,
                                                                                 tmp_path: Path) -> None:
    runner = FakeRunner(succeeded(ok=1, failures=1, failed_tasks=(FailedTask("install", "boom"),)))
    cr(cluster, finalizers=[FINALIZER])
    outcome = await make(cluster, runner, tmp_path).reconcile("ns", "m")
    assert outcome == Outcome(failed=True)
    found = conditions(cluster.stored("Memcached", "ns", "m"))
    assert (found["Failure"]["status"], found["Failure"]["reason"], found["Failure"]["message"]) == \
        ("True", "Failed", "install: boom")
    assert found["Failure"]["ansibleResult"]["failures"] == 1
    assert (found["Running"]["status"], found["Successful"]["status"]) == ("False", "False")
    assert [(e.type, e.reason, e.message) for e in cluster.events] == \
        [("Warning", "ReconcileFailed", "task 'install' failed: boom")]
    assert len(cluster.status_patches()) == 2


async def test_a_run_that_could_not_happen_reports_its_error(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner(RunResult(error="the playbook has a syntax error"))
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, runner, tmp_path).reconcile("ns", "m") == Outcome(failed=True)
    found = conditions(cluster.stored("Memcached", "ns", "m"))
    assert (found["Failure"]["status"], found["Failure"]["message"]) == ("True", "the playbook has a syntax error")
    assert "ansibleResult" not in found["Failure"]


async def test_a_bad_annotation_is_reported_without_a_run(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner()
    cr(cluster, annotations={"ansible.sdk.operatorframework.io/verbosity": "loud"})
    outcome = await make(cluster, runner, tmp_path).reconcile("ns", "m")
    assert outcome == Outcome(failed=True)
    assert runner.requests == []
    failure = conditions(cluster.stored("Memcached", "ns", "m"))["Failure"]
    assert failure["status"] == "True" and "verbosity" in failure["message"] and "'loud'" in failure["message"]
    assert [(e.type, e.reason) for e in cluster.events] == [("Warning", "ReconcileFailed")]
    assert [w.verb for w in cluster.writes] == ["patch_status"], "no finalizer either"


async def test_an_object_outside_the_selector_is_left_alone(cluster: FakeCluster, tmp_path: Path) -> None:
    from hybrid_operator.config.model import LabelSelector

    runner = FakeRunner()
    cr(cluster)
    reconciler = make(cluster, runner, tmp_path, selector=LabelSelector(match_labels={"tier": "cache"}))
    assert await reconciler.reconcile("ns", "m") == Outcome()
    assert runner.requests == [] and cluster.writes == []


async def test_a_missing_object_needs_nothing(cluster: FakeCluster, tmp_path: Path) -> None:
    assert await make(cluster, FakeRunner(), tmp_path).reconcile("ns", "gone") == Outcome()
    assert cluster.writes == []


async def test_an_unserved_kind_is_retried_with_the_apis_hint(tmp_path: Path) -> None:
    empty = FakeCluster()
    outcome = await make(empty, FakeRunner(), tmp_path).reconcile("ns", "m")
    assert outcome == Outcome(failed=True, retry_after=5)


async def test_without_manage_status_only_the_playbooks_status_is_written(cluster: FakeCluster,
                                                                         tmp_path: Path) -> None:
    runner = FakeRunner(succeeded(stats_data={"status": {"phase": "ready"}}))
    cr(cluster, finalizers=[FINALIZER])
    await make(cluster, runner, tmp_path, manage_status=False).reconcile("ns", "m")
    assert cluster.status_patches() == [{"status": {"phase": "ready"}}]


# -- deletion ---------------------------------------------------------------------------------------


async def test_the_finalizer_is_removed_only_after_a_successful_finalizer_run(cluster: FakeCluster,
                                                                              tmp_path: Path) -> None:
    runner = FakeRunner(succeeded())
    cr(cluster, finalizers=[FINALIZER], deleting=True)
    assert await make(cluster, runner, tmp_path).reconcile("ns", "m") == Outcome()
    assert runner.requests[0].finalizer is True
    assert [w.verb for w in cluster.writes] == ["set_finalizer"]
    assert cluster.stored("Memcached", "ns", "m") is None, "the last finalizer went, so did the object"


async def test_a_failed_finalizer_run_keeps_the_finalizer(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner(succeeded(failures=1, failed_tasks=(FailedTask("cleanup", "still in use"),)))
    cr(cluster, finalizers=[FINALIZER], deleting=True)
    assert await make(cluster, runner, tmp_path).reconcile("ns", "m") == Outcome(failed=True)
    stored = cluster.stored("Memcached", "ns", "m")
    assert stored is not None and stored["metadata"]["finalizers"] == [FINALIZER]
    assert conditions(stored)["Failure"]["message"] == "cleanup: still in use"
    assert cluster.writes_of("set_finalizer") == []


async def test_deletion_without_our_finalizer_runs_nothing(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner()
    cr(cluster, finalizers=["someone.else/finalizer"], deleting=True)
    assert await make(cluster, runner, tmp_path).reconcile("ns", "m") == Outcome()
    assert runner.requests == [] and cluster.writes == []


async def test_a_kind_without_a_finalizer_runs_without_adding_one(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner(succeeded())
    cr(cluster)
    await make(cluster, runner, tmp_path, finalizer=False).reconcile("ns", "m")
    assert [w.verb for w in cluster.writes] == ["patch_status", "patch_status"]


# -- cancellation -----------------------------------------------------------------------------------


async def test_a_cancelled_run_reports_why_in_the_status(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner()
    runner.hold()
    cr(cluster, finalizers=[FINALIZER])
    reconciler = make(cluster, runner, tmp_path)
    task = asyncio.create_task(reconciler.reconcile("ns", "m"))
    await asyncio.wait_for(runner.started.wait(), 5)
    reconciler.cancel.cancel("the operator is shutting down")
    outcome = await asyncio.wait_for(task, 5)
    assert outcome == Outcome(failed=True)
    failure = conditions(cluster.stored("Memcached", "ns", "m"))["Failure"]
    assert (failure["status"], failure["message"]) == \
        ("True", "the run was cancelled: the operator is shutting down")
    assert cluster.reasons() == ["ReconcileFailed"]


# -- the object a run receives is the object checked (issue 28 item 2) ------------------------------------------


class EditedBeforeTheStatusWrite(FakeCluster):
    """Someone edits the spec between the reconciler's read and its Running status write."""

    def __init__(self, edit: dict[str, Any]) -> None:
        super().__init__()
        self.edit = edit

    def patch_status(self, ref: Any, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any] | None:
        stored = self.objects.get(self._key(ref, namespace, name))
        if self.edit and stored is not None:
            stored["spec"] = {**stored.get("spec", {}), **self.edit}
            self.edit = {}
        return super().patch_status(ref, namespace, name, patch)


async def test_a_spec_edited_before_the_status_write_is_checked_again(tmp_path: Path) -> None:
    cluster = EditedBeforeTheStatusWrite({"ansibleRemoteTmp": "/tmp/x$(touch /tmp/pwned)"})
    cluster.add_kind(GVK.group, GVK.version, GVK.kind, "memcacheds")
    runner = FakeRunner()
    cr(cluster, finalizers=[FINALIZER])
    outcome = await make(cluster, runner, tmp_path).reconcile("ns", "m")
    assert runner.requests == [], "the run received an object nobody checked"
    assert outcome == Outcome()
    failure = conditions(cluster.objects[(GVK.group, GVK.kind, "ns", "m")])["Failure"]
    assert failure["status"] == "True" and "spec.ansibleRemoteTmp" in failure["message"]
    assert [event.reason for event in cluster.events] == ["SpecRefused"]


async def test_the_run_receives_exactly_the_checked_object(tmp_path: Path) -> None:
    cluster = EditedBeforeTheStatusWrite({"size": 3})
    cluster.add_kind(GVK.group, GVK.version, GVK.kind, "memcacheds")
    runner = FakeRunner(succeeded(ok=1))
    cr(cluster, finalizers=[FINALIZER])
    await make(cluster, runner, tmp_path).reconcile("ns", "m")
    (request,) = runner.requests
    assert request.cr["spec"] == {"size": 3}  # the last write's answer, checked
    # the store changes afterwards: the run's copy does not
    cluster.objects[(GVK.group, GVK.kind, "ns", "m")]["spec"]["size"] = 9
    assert request.cr["spec"] == {"size": 3}


async def test_spec_keys_naming_variables_the_playbook_sets_are_refused(cluster: FakeCluster, tmp_path: Path) -> None:
    playbook = tmp_path / "playbook.yml"
    playbook.write_text("- hosts: localhost\n  tasks:\n    - ansible.builtin.set_fact:\n        target: x\n")
    spec = AnsibleWatch(gvk=GVK, playbook=playbook)
    settings = Settings(artifacts_dir=tmp_path / "runner", watches_file=tmp_path / "watches.yaml")
    runner = FakeRunner()
    cluster.create({"apiVersion": GVK.api_version, "kind": GVK.kind, "metadata": {"name": "m", "namespace": "ns"},
                    "spec": {"target": "victim"}})
    reconciler = AnsibleReconciler(spec, cluster, runner, settings, asyncio.Semaphore(1), tmp_path / "kubeconfig", {})
    await reconciler.reconcile("ns", "m")
    assert runner.requests == []
    failure = conditions(cluster.objects[(GVK.group, GVK.kind, "ns", "m")])["Failure"]
    assert 'spec.target: is the variable "target", which the automation sets itself (set_fact at playbook.yml:3)' \
        in failure["message"]
