"""Every limit a CR's annotations set has a floor and a ceiling (hybrid_operator.config.bounds).

The Ansible and Helm reconcilers read the annotations through FakeCluster/FakeRunner/FakeHelmClient:
what a run is given, when the resource is looked at again, and the one Warning Event that tells the
resource's author what was changed.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.reconciler import MAX_RUNNER_ARTIFACTS, RECONCILE_PERIOD, VERBOSITY, AnsibleReconciler
from hybrid_operator.config import bounds
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind, HelmWatch
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller.reconcile import Outcome
from hybrid_operator.helm import annotations as helm_annotations
from support.fakes import FakeCluster, FakeRunner, succeeded

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")
HELM_PERIOD = helm_annotations.RECONCILE_PERIOD


@pytest.mark.parametrize(("asked", "used", "changed"), [
    (timedelta(0), timedelta(0), False),
    (timedelta(microseconds=1000), bounds.PERIOD_FLOOR, True),
    (timedelta(seconds=-5), bounds.PERIOD_FLOOR, True),
    (timedelta(seconds=1), timedelta(seconds=1), False),
    (timedelta(hours=10), timedelta(hours=10), False),
    (timedelta(days=7), timedelta(days=7), False),
    (timedelta(days=400), bounds.PERIOD_CEILING, True),
])
def test_reconcile_period_floor_and_ceiling(asked: timedelta, used: timedelta, changed: bool) -> None:
    value, note = bounds.period("x/reconcile-period", asked)
    assert value == used
    assert bool(note) is changed


@pytest.mark.parametrize(("asked", "ceiling", "used"), [(0, 20, 20), (1, 20, 1), (20, 20, 20), (500, 20, 20),
                                                         (3, 0, 1)])
def test_runner_artifacts_floor_and_ceiling(asked: int, ceiling: int, used: int) -> None:
    assert bounds.runner_artifacts("x/max-runner-artifacts", asked, ceiling)[0] == used


def test_notes_say_what_was_asked_and_what_is_used() -> None:
    assert bounds.period("a/reconcile-period", timedelta(microseconds=1000))[1] == \
        "annotation a/reconcile-period: 1ms is out of range, 1s is used (the floor)"
    assert bounds.period("a/reconcile-period", timedelta(days=30))[1] == \
        "annotation a/reconcile-period: 720h0m0s is out of range, 168h0m0s is used (the ceiling)"
    assert "0 is out of range, 20 is used" in bounds.runner_artifacts("a/max-runner-artifacts", 0, 20)[1]
    assert bounds.verbosity("a/verbosity", 9) == (7, "annotation a/verbosity: 9 is out of range, 7 is used "
                                                      "(the ceiling)")


def cr(cluster: FakeCluster, annotations: dict[str, str], kind: str = GVK.kind) -> dict[str, Any]:
    return cluster.create({"apiVersion": GVK.api_version, "kind": kind,
                           "metadata": {"name": "m", "namespace": "ns", "annotations": annotations}, "spec": {}})


async def test_the_issue_annotations_are_brought_into_range_for_ansible(tmp_path: Path) -> None:
    cluster = FakeCluster()
    cluster.add_kind(GVK.group, GVK.version, GVK.kind, "memcacheds")
    runner = FakeRunner(succeeded(), succeeded(), succeeded())
    watch = AnsibleWatch(gvk=GVK, playbook=Path("/nowhere/playbook.yml"))
    reconciler = AnsibleReconciler(watch, cluster, runner, Settings(artifacts_dir=tmp_path), asyncio.Semaphore(1),
                                   tmp_path / "kubeconfig", {})
    cr(cluster, {RECONCILE_PERIOD: "1ms", MAX_RUNNER_ARTIFACTS: "0", VERBOSITY: "99"})
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=1.0)
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=1.0)
    request = runner.requests[-1]
    assert (request.max_artifacts, request.verbosity) == (watch.max_runner_artifacts, 7)
    told = [event for event in cluster.events if event.reason == bounds.EVENT_REASON]
    assert len(told) == 1, "the same annotations are told once, not on every reconcile"
    assert told[0].type == "Warning"
    for fragment in ("reconcile-period: 1ms is out of range, 1s is used", "max-runner-artifacts: 0 is out of range",
                     "verbosity: 99 is out of range, 7 is used"):
        assert fragment in told[0].message
    cluster.stored(GVK.kind, "ns", "m")["metadata"]["annotations"] = {RECONCILE_PERIOD: "2s"}  # type: ignore[index]
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=2.0)
    assert len([event for event in cluster.events if event.reason == bounds.EVENT_REASON]) == 1


def test_the_helm_reconcile_period_is_brought_into_range() -> None:
    watch = HelmWatch(gvk=GVK, chart=Path("charts/x"))
    settings = Settings(reconcile_period=timedelta(minutes=1))
    low = helm_annotations.helm_options({"metadata": {"annotations": {HELM_PERIOD: "1ms"}}}, watch, settings)
    assert low.period == bounds.PERIOD_FLOOR and "1ms is out of range, 1s is used" in low.out_of_range[0]
    high = helm_annotations.helm_options({"metadata": {"annotations": {HELM_PERIOD: "9000h"}}}, watch, settings)
    assert high.period == bounds.PERIOD_CEILING
    off = helm_annotations.helm_options({"metadata": {"annotations": {HELM_PERIOD: "0"}}}, watch, settings)
    assert (off.period, off.out_of_range) == (timedelta(0), ())
