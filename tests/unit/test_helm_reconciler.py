"""Unit tests for hybrid_operator.helm.reconciler: every release state transition, through fakes.

helm's answers are scripted on a FakeHelmClient (each test lists exactly the calls it expects, in
order: an unscripted call fails the test, a scripted one left unused is checked at the end); the
CR, its status and the objects drift repair applies live in a FakeCluster.  Each reconcile writes
the status at most once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator import errors
from hybrid_operator.config.model import GroupVersionKind, HelmWatch
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller.controller import Controller
from hybrid_operator.controller.dependents import ChildKind
from hybrid_operator.controller.reconcile import Outcome
from hybrid_operator.helm import values
from hybrid_operator.helm.client import HelmError, HelmErrorKind, Release, ReleaseInfo, Revision
from hybrid_operator.helm.ownership import OWNER_LABEL
from hybrid_operator.helm.reconciler import FINALIZER, LEGACY_FINALIZER, HelmReconciler
from hybrid_operator.helm.release import INPUTS_LABEL, inputs_label
from support.fakes import FakeClock, FakeCluster, FakeHelmClient, Held, settle

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")
DIGEST = "c" * 64
SPEC = {"size": 2}
INPUTS = values.inputs_digest(DIGEST, SPEC)
OLD_INPUTS = "0" * 40
DRY_RUN = FakeHelmClient.DRY_RUN
P = "helm.sdk.operatorframework.io/"
OWNER = "Memcached.cache.example.com"

MANIFEST = """---
# Source: memcached/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: m-config
data:
  size: "2"
"""
NEW_MANIFEST = MANIFEST.replace('"2"', '"3"')


def not_found() -> HelmError:
    return HelmError(HelmErrorKind.NOT_FOUND, "release: not found", "get metadata")


def info(revision: int, status: str = "deployed", inputs: str | None = OLD_INPUTS,
         label_revision: int | None = None, owner: str | None = OWNER) -> ReleaseInfo:
    labels = {INPUTS_LABEL: inputs_label(inputs, label_revision or revision)} if inputs else {}
    if owner:
        labels[OWNER_LABEL] = owner
    return ReleaseInfo("m", revision, status, labels=labels)


def labels(inputs: str, revision: int) -> dict[str, str]:
    """The labels of a revision the operator makes."""
    return {INPUTS_LABEL: inputs_label(inputs, revision), OWNER_LABEL: OWNER}


def rendered(manifest: str, revision: int = 2, status: str = "pending-upgrade", notes: str = "") -> Release:
    return Release("m", revision, status, manifest, notes)


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add_kind(GVK.group, GVK.version, GVK.kind, "memcacheds")
    cluster.add_kind("", "v1", "ConfigMap", "configmaps")
    return cluster


@pytest.fixture
def helm() -> Iterator[FakeHelmClient]:
    fake = FakeHelmClient()
    yield fake
    assert fake.unused() == {}, "every scripted helm answer was asked for"


def make(cluster: FakeCluster, helm: FakeHelmClient, **watch: Any) -> HelmReconciler:
    spec = HelmWatch(gvk=GVK, chart=Path("/charts/memcached"), **watch)
    settings = Settings(reconcile_period=timedelta(minutes=1))
    return HelmReconciler(spec, cluster, helm, settings, asyncio.Semaphore(1), DIGEST)  # type: ignore[arg-type]


def cr(cluster: FakeCluster, *, finalizers: list[str] | None = None, annotations: dict[str, str] | None = None,
       status: dict[str, Any] | None = None, deleting: bool = False, generation: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m", "namespace": "ns", "annotations": annotations or {},
                            "generation": generation}
    if finalizers is not None:
        meta["finalizers"] = finalizers
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    obj: dict[str, Any] = {"apiVersion": GVK.api_version, "kind": GVK.kind, "metadata": meta, "spec": dict(SPEC)}
    if status is not None:
        obj["status"] = status
    return cluster.create(obj)


def stored(cluster: FakeCluster) -> dict[str, Any]:
    found = cluster.stored("Memcached", "ns", "m")
    assert found is not None
    return found


def conditions(cluster: FakeCluster) -> dict[str, tuple[str, str, str]]:
    listed = stored(cluster).get("status", {}).get("conditions", [])
    return {c["type"]: (c["status"], c.get("reason", ""), c.get("message", "")) for c in listed}


def config_map(cluster: FakeCluster, data: str = "2") -> None:
    cluster.apply(cluster.resolve("", "v1", "ConfigMap"), "ns",
                  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m-config"}, "data": {"size": data}},
                  "helm")
    cluster.writes.clear()


async def finished(controller: Controller) -> None:
    """Wait until no reconcile is queued or running (reconciles call the fake cluster in threads)."""
    async def quiet() -> None:
        while True:
            await settle()
            if controller.in_flight == 0 and controller.queue.depth() == 0:
                return
            await asyncio.sleep(0.001)

    await asyncio.wait_for(quiet(), 10)


# -- needs-install ------------------------------------------------------------------------------------


async def test_install_adds_the_finalizer_first_and_writes_the_status_once(cluster: FakeCluster,
                                                                         helm: FakeHelmClient) -> None:
    helm.script("info", not_found()).script("install", rendered(MANIFEST, 1, "deployed", "memcached is up"))
    cr(cluster)
    reconciler = make(cluster, helm)
    children: list[set[ChildKind]] = []

    async def on_children(obj: dict[str, Any], kinds: set[ChildKind]) -> None:
        children.append(kinds)

    reconciler.on_children = on_children
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=60.0)

    assert helm.called() == ["info", "install"]
    install = helm.calls[1].args
    assert install["values"] == SPEC and install["chart"] == Path("/charts/memcached")
    assert install["options"].labels == labels(INPUTS, 1)
    assert [w.verb for w in cluster.writes] == ["set_finalizer", "patch_status"]
    assert stored(cluster)["metadata"]["finalizers"] == [FINALIZER]
    assert conditions(cluster) == {"Initialized": ("True", "", ""),
                                   "Deployed": ("True", "InstallSuccessful", "memcached is up")}
    status = stored(cluster)["status"]
    assert status["deployedRelease"] == {"name": "m", "manifest": MANIFEST}
    assert status["observedGeneration"] == 1
    assert children == [{ChildKind("", "v1", "ConfigMap")}]


async def test_a_legacy_finalizer_is_enough(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    helm.script("info", not_found()).script("install", rendered(MANIFEST, 1, "deployed"))
    cr(cluster, finalizers=[LEGACY_FINALIZER])
    await make(cluster, helm).reconcile("ns", "m")
    assert cluster.writes_of("set_finalizer") == []


async def test_a_render_error_on_install_is_reported_without_an_uninstall(cluster: FakeCluster,
                                                                        helm: FakeHelmClient) -> None:
    error = HelmError(HelmErrorKind.RENDER, "execution error at (x/templates/cm.yaml:3): size is required", "install")
    helm.script("info", not_found()).script("install", error)
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert helm.called() == ["info", "install"]
    assert conditions(cluster)["ReleaseFailed"] == ("True", "InstallError", error.message)
    assert "Deployed" not in conditions(cluster)
    assert [(e.type, e.reason) for e in cluster.events] == [("Warning", "InstallError")]
    assert len(cluster.status_patches()) == 1


async def test_a_refused_manifest_fails_the_install_without_an_uninstall(cluster: FakeCluster,
                                                                        helm: FakeHelmClient) -> None:
    message = "the rendered manifest was refused, nothing was applied: ConfigMap x (v1) names namespace kube-system"
    helm.script("info", not_found()).script("install", HelmError(HelmErrorKind.REFUSED, message, "install"))
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert helm.called() == ["info", "install"]
    assert helm.calls[1].args["cross_namespace"] is False
    assert conditions(cluster)["ReleaseFailed"] == ("True", "InstallError", message)
    assert [(e.type, e.reason, e.message) for e in cluster.events] == [("Warning", "ManifestRefused", message)]


async def test_a_refused_candidate_is_an_upgrade_error_and_nothing_is_upgraded(cluster: FakeCluster,
                                                                              helm: FakeHelmClient) -> None:
    message = "the rendered manifest was refused, nothing was applied: Deployment m: duplicate key spec.x"
    helm.script("info", info(1)).script(DRY_RUN, HelmError(HelmErrorKind.REFUSED, message, "upgrade"))
    helm.script("manifest", MANIFEST)
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm, allow_cross_namespace=True).reconcile("ns", "m") == Outcome(failed=True)
    assert "upgrade" not in helm.called() and "rollback" not in helm.called()
    assert [call.args["cross_namespace"] for call in helm.calls if call.method == DRY_RUN] == [True]
    assert conditions(cluster)["ReleaseFailed"] == ("True", "UpgradeError", message)
    assert [(e.type, e.reason) for e in cluster.events] == [("Warning", "ManifestRefused")]


async def test_a_failed_install_is_uninstalled(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    error = HelmError(HelmErrorKind.OTHER, 'namespaces "nowhere" not found', "install")
    helm.script("info", not_found()).script("install", error).script("info", info(1, "failed"))
    helm.script("uninstall", True)
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert helm.called() == ["info", "install", "info", "uninstall"]
    assert conditions(cluster)["ReleaseFailed"][:2] == ("True", "InstallError")


async def test_override_values_are_announced_before_the_install(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    helm.script("info", not_found()).script("install", rendered(MANIFEST, 1, "deployed"))
    cr(cluster, finalizers=[FINALIZER])
    await make(cluster, helm, override_values={"image.tag": "1.2.3"}).reconcile("ns", "m")
    assert helm.calls[1].args["values"] == {"size": 2, "image": {"tag": "1.2.3"}}
    assert [(e.reason, e.message) for e in cluster.events] == \
        [("OverrideValuesInUse", 'Chart value "image.tag" overridden to "1.2.3" by operator\'s watches.yaml')]


# -- needs-upgrade ------------------------------------------------------------------------------------


async def test_changed_inputs_upgrade_with_the_next_revisions_label(cluster: FakeCluster,
                                                                   helm: FakeHelmClient) -> None:
    helm.script("info", info(1)).script(DRY_RUN, rendered(NEW_MANIFEST)).script("manifest", MANIFEST)
    helm.script("upgrade", rendered(NEW_MANIFEST, 2, "deployed", "upgraded notes"))
    cr(cluster, finalizers=[FINALIZER], annotations={P + "upgrade-force": "true"})
    assert await make(cluster, helm, dry_run_option="server").reconcile("ns", "m") == Outcome(requeue_after=60.0)

    assert helm.called() == ["info", DRY_RUN, "manifest", "upgrade"]
    assert helm.calls[1].args["dry_run"] == "server"
    assert helm.calls[2].args["revision"] == 1
    options = helm.calls[3].args["options"]
    assert options.labels == labels(INPUTS, 2) and options.force is True
    assert conditions(cluster)["Deployed"] == ("True", "UpgradeSuccessful", "upgraded notes")
    assert stored(cluster)["status"]["deployedRelease"]["manifest"] == NEW_MANIFEST
    assert len(cluster.status_patches()) == 1


async def test_a_failed_upgrade_is_rolled_back_once_and_backs_off(cluster: FakeCluster,
                                                                 helm: FakeHelmClient) -> None:
    """HOP#224: a failed upgrade must not turn into a rollback loop (one rollback per attempt, backoff)."""
    failure = HelmError(HelmErrorKind.OTHER, 'UPGRADE FAILED: namespaces "nowhere" not found', "upgrade")
    helm.script("info", info(1)).script(DRY_RUN, rendered(NEW_MANIFEST)).script("manifest", MANIFEST)
    helm.script("upgrade", failure).script("info", info(2, "failed", None)).script("rollback", None)
    obj = cr(cluster, finalizers=[FINALIZER])
    clock = FakeClock(start=0.0)
    reconciler = make(cluster, helm)
    controller = Controller(watch=reconciler.watch, reconciler=reconciler, workers=1, clock=clock)
    controller.start()
    try:
        await controller.on_event("ADDED", obj)
        await finished(controller)
        assert helm.called("upgrade", "rollback") == ["upgrade", "rollback"]
        rollback = helm.calls[-1].args
        assert rollback["revision"] == 1 and rollback["options"].force is True  # rollback-force defaults to true
        released = conditions(cluster)["ReleaseFailed"]
        assert released[:2] == ("True", "UpgradeError")
        assert released[2] == failure.message + "; rolled back to revision 1"
        assert [(e.type, e.reason) for e in cluster.events] == [("Warning", "UpgradeError")]
        assert len(cluster.status_patches()) == 1

        # the status write comes back as an event: it must not bypass the backoff
        await controller.on_event("MODIFIED", stored(cluster))
        await clock.advance(0.5)
        await finished(controller)
        assert controller.queue.pending(("ns", "m")) == 1.0
        assert helm.called("rollback") == ["rollback"]

        # the retry after the backoff: again one upgrade and one rollback, then a longer wait
        helm.script("info", info(3, inputs=OLD_INPUTS, label_revision=1)).script(DRY_RUN, rendered(NEW_MANIFEST, 4))
        helm.script("manifest", MANIFEST).script("upgrade", failure)
        helm.script("info", info(4, "failed", None)).script("rollback", None)
        await clock.advance(0.5)
        await finished(controller)
        assert helm.called("upgrade", "rollback") == ["upgrade", "rollback"] * 2
        assert helm.calls[-1].args["revision"] == 3
        assert controller.queue.pending(("ns", "m")) == 3.0
    finally:
        await controller.close()


async def test_an_upgrade_that_left_no_new_revision_is_not_rolled_back(cluster: FakeCluster,
                                                                      helm: FakeHelmClient) -> None:
    failure = HelmError(HelmErrorKind.TIMEOUT, "helm upgrade m did not finish", "upgrade")
    helm.script("info", info(1)).script(DRY_RUN, rendered(NEW_MANIFEST)).script("manifest", MANIFEST)
    helm.script("upgrade", failure).script("info", info(1))
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert helm.called("rollback") == []
    assert conditions(cluster)["ReleaseFailed"][2] == failure.message


async def test_a_render_error_in_the_candidate_is_an_upgrade_error(cluster: FakeCluster,
                                                                   helm: FakeHelmClient) -> None:
    error = HelmError(HelmErrorKind.RENDER, "template: x/templates/cm.yaml:3: bad", "upgrade")
    helm.script("info", info(1)).script(DRY_RUN, error).script("manifest", MANIFEST)
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert conditions(cluster)["ReleaseFailed"] == ("True", "UpgradeError", error.message)


async def test_a_dry_run_that_fails_otherwise_is_irreconcilable(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    error = HelmError(HelmErrorKind.UNREACHABLE, "Kubernetes cluster unreachable", "upgrade")
    helm.script("info", info(1)).script(DRY_RUN, error).script("manifest", MANIFEST)
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert conditions(cluster)["Irreconcilable"] == \
        ("True", "ReconcileError", "dry-run upgrade of release m failed: Kubernetes cluster unreachable")
    assert [(e.type, e.reason) for e in cluster.events] == [("Warning", "ReconcileError")]


async def test_the_dry_run_and_the_deployed_manifest_are_asked_for_at_once(cluster: FakeCluster,
                                                                          helm: FakeHelmClient) -> None:
    dry_run, manifest = Held(rendered(MANIFEST)), Held(MANIFEST)
    helm.script("info", info(1)).script(DRY_RUN, dry_run).script("manifest", manifest)
    cr(cluster, finalizers=[FINALIZER])
    config_map(cluster)
    task = asyncio.create_task(make(cluster, helm).reconcile("ns", "m"))
    await asyncio.wait_for(asyncio.gather(dry_run.started.wait(), manifest.started.wait()), 5)
    manifest.release.set()
    dry_run.release.set()
    assert await asyncio.wait_for(task, 5) == Outcome(requeue_after=60.0)


async def test_a_deployed_manifest_helm_cannot_read_is_irreconcilable(cluster: FakeCluster,
                                                                     helm: FakeHelmClient) -> None:
    error = HelmError(HelmErrorKind.NOT_FOUND, "release: not found", "get manifest")
    helm.script("info", info(1)).script(DRY_RUN, rendered(MANIFEST)).script("manifest", error)
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert conditions(cluster)["Irreconcilable"][2] == "dry-run upgrade of release m failed: release: not found"


async def test_a_state_helm_cannot_read_is_irreconcilable(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    helm.script("info", HelmError(HelmErrorKind.UNREACHABLE, "connection refused", "get metadata"))
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert conditions(cluster)["Irreconcilable"][2] == "cannot read the state of release m: connection refused"
    assert len(cluster.status_patches()) == 1


# -- unchanged: drift repair --------------------------------------------------------------------------


async def test_unchanged_repairs_drift_without_a_new_revision(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    helm.script("info", info(1)).script(DRY_RUN, rendered(MANIFEST, notes="notes")).script("manifest", MANIFEST)
    cr(cluster, finalizers=[FINALIZER])
    reconciler = make(cluster, helm)
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=60.0)

    assert helm.called() == ["info", DRY_RUN, "manifest"]
    applied = cluster.writes_of("apply")
    assert len(applied) == 1
    body = applied[0].body
    assert (body["field_manager"], body["force"]) == ("helm", True)
    assert body["body"]["metadata"] == {
        "name": "m-config", "namespace": "ns", "labels": {"app.kubernetes.io/managed-by": "Helm"},
        "annotations": {"meta.helm.sh/release-name": "m", "meta.helm.sh/release-namespace": "ns"}}
    assert [(e.type, e.reason, e.message) for e in cluster.events] == \
        [("Normal", "DriftRepaired", "re-created ConfigMap m-config")]
    assert conditions(cluster)["Deployed"] == ("True", "InstallSuccessful", "notes")
    assert len(cluster.status_patches()) == 1

    # a resync with nothing to repair writes no status and posts no Event
    helm.script("info", info(1)).script(DRY_RUN, rendered(MANIFEST, notes="notes")).script("manifest", MANIFEST)
    await reconciler.reconcile("ns", "m")
    assert len(cluster.status_patches()) == 1 and len(cluster.events) == 1
    assert len(cluster.writes_of("apply")) == 2


async def test_a_release_upgraded_before_reports_upgrade_successful(cluster: FakeCluster,
                                                                   helm: FakeHelmClient) -> None:
    helm.script("info", info(3)).script(DRY_RUN, rendered(MANIFEST, 4)).script("manifest", MANIFEST)
    cr(cluster, finalizers=[FINALIZER])
    config_map(cluster)
    await make(cluster, helm).reconcile("ns", "m")
    assert conditions(cluster)["Deployed"][:2] == ("True", "UpgradeSuccessful")
    assert cluster.events == []


async def test_a_failed_drift_repair_is_irreconcilable_and_clears_release_failed(cluster: FakeCluster,
                                                                                helm: FakeHelmClient) -> None:
    helm.script("info", info(1)).script(DRY_RUN, rendered(MANIFEST)).script("manifest", MANIFEST)
    stale = {"conditions": [{"type": "ReleaseFailed", "status": "True", "reason": "UpgradeError",
                             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    cr(cluster, finalizers=[FINALIZER], status=stale)
    cluster.fail("apply", errors.TemporaryError("could not apply ConfigMap ns/m-config: API answered 500"))
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    found = conditions(cluster)
    assert "ReleaseFailed" not in found
    assert found["Irreconcilable"][2].startswith("drift repair of release m failed: could not apply")


# -- nondeterministic render --------------------------------------------------------------------------


async def test_same_inputs_with_a_different_manifest_flag_the_chart_instead_of_upgrading(
        cluster: FakeCluster, helm: FakeHelmClient) -> None:
    for _ in range(2):
        helm.script("info", info(1, inputs=INPUTS)).script(DRY_RUN, rendered(NEW_MANIFEST)).script("manifest", MANIFEST)
    cr(cluster, finalizers=[FINALIZER])
    config_map(cluster)
    reconciler = make(cluster, helm)
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=60.0)
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=60.0)

    assert "upgrade" not in helm.called()
    found = conditions(cluster)
    assert found["NondeterministicRender"][:2] == ("True", "SameInputsDifferentManifest")
    assert found["Deployed"][0] == "True"
    assert [e.reason for e in cluster.events] == ["NondeterministicRender"], "one Event, not one per resync"
    assert len(cluster.status_patches()) == 1
    assert stored(cluster)["status"]["deployedRelease"]["manifest"] == MANIFEST, "the deployed revision is kept"
    applied = [w.body["body"]["data"] for w in cluster.writes_of("apply")]
    assert applied == [{"size": "2"}, {"size": "2"}], "drift repair applies the deployed manifest"


async def test_the_flag_goes_once_the_render_is_deterministic_again(cluster: FakeCluster,
                                                                    helm: FakeHelmClient) -> None:
    helm.script("info", info(1, inputs=INPUTS)).script(DRY_RUN, rendered(MANIFEST)).script("manifest", MANIFEST)
    flagged = {"conditions": [{"type": "NondeterministicRender", "status": "True",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    cr(cluster, finalizers=[FINALIZER], status=flagged)
    config_map(cluster)
    await make(cluster, helm).reconcile("ns", "m")
    assert "NondeterministicRender" not in conditions(cluster)


# -- pending and failed releases ----------------------------------------------------------------------


async def test_a_pending_upgrade_is_rolled_back_to_the_last_deployed_revision(cluster: FakeCluster,
                                                                              helm: FakeHelmClient) -> None:
    helm.script("info", info(3, "pending-upgrade", None))
    helm.script("history", [Revision(1, "superseded"), Revision(2, "deployed"), Revision(3, "pending-upgrade")])
    helm.script("rollback", None)
    helm.script("info", info(4, inputs=OLD_INPUTS, label_revision=2)).script(DRY_RUN, rendered(MANIFEST, 5))
    helm.script("manifest", MANIFEST)
    cr(cluster, finalizers=[FINALIZER])
    config_map(cluster)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(requeue_after=60.0)

    assert helm.called() == ["info", "history", "rollback", "info", DRY_RUN, "manifest"]
    rollback = helm.calls[2].args
    assert rollback["revision"] == 2 and rollback["options"].force is False
    assert helm.calls[5].args["revision"] == 4
    assert [(e.reason, e.message) for e in cluster.events] == [
        ("ReleaseRecovered", "release m was left pending-upgrade (revision 3); rolled back to the last deployed "
                             "revision 2")]
    assert conditions(cluster)["Deployed"][:2] == ("True", "UpgradeSuccessful")
    assert "Irreconcilable" not in conditions(cluster)
    assert len(cluster.status_patches()) == 1


async def test_a_pending_install_is_uninstalled_and_installed_again(cluster: FakeCluster,
                                                                    helm: FakeHelmClient) -> None:
    helm.script("info", info(1, "pending-install", None)).script("history", [Revision(1, "pending-install")])
    helm.script("uninstall", True).script("install", rendered(MANIFEST, 1, "deployed"))
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(requeue_after=60.0)
    assert helm.called() == ["info", "history", "uninstall", "install"]
    assert [e.reason for e in cluster.events] == ["ReleaseRecovered"]
    assert "uninstalled it to install again" in cluster.events[0].message
    assert conditions(cluster)["Deployed"][:2] == ("True", "InstallSuccessful")


async def test_a_release_still_pending_after_the_rollback_is_irreconcilable(cluster: FakeCluster,
                                                                           helm: FakeHelmClient) -> None:
    helm.script("info", info(3, "pending-upgrade", None))
    helm.script("history", [Revision(2, "deployed"), Revision(3, "pending-upgrade")]).script("rollback", None)
    helm.script("info", info(4, "pending-rollback", None))
    helm.script("history", [Revision(2, "deployed"), Revision(3, "failed"), Revision(4, "pending-rollback")])
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert helm.called("rollback") == ["rollback"], "one recovery per reconcile"
    assert "pending-rollback again" in conditions(cluster)["Irreconcilable"][2]


async def test_a_failed_release_never_deployed_is_removed_then_installed(cluster: FakeCluster,
                                                                         helm: FakeHelmClient) -> None:
    helm.script("info", info(2, "failed", None)).script("history", [Revision(1, "failed"), Revision(2, "failed")])
    helm.script("uninstall", True).script("install", rendered(MANIFEST, 1, "deployed"))
    cr(cluster, finalizers=[FINALIZER])
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(requeue_after=60.0)
    assert helm.called() == ["info", "history", "uninstall", "install"]
    assert cluster.events == []


async def test_a_failed_latest_revision_is_compared_with_the_last_deployed_one(cluster: FakeCluster,
                                                                             helm: FakeHelmClient) -> None:
    helm.script("info", info(3, "failed", None))
    helm.script("history", [Revision(1, "superseded"), Revision(2, "deployed"), Revision(3, "failed")])
    helm.script("info", info(2)).script(DRY_RUN, rendered(NEW_MANIFEST, 4)).script("manifest", MANIFEST)
    helm.script("upgrade", rendered(NEW_MANIFEST, 4, "deployed"))
    cr(cluster, finalizers=[FINALIZER])
    await make(cluster, helm).reconcile("ns", "m")
    assert helm.called() == ["info", "history", "info", DRY_RUN, "manifest", "upgrade"]
    assert helm.calls[2].args["revision"] == 2 and helm.calls[4].args["revision"] == 2
    assert helm.calls[5].args["options"].labels == labels(INPUTS, 4)


# -- deletion -----------------------------------------------------------------------------------------


def deployed_status() -> dict[str, Any]:
    return {"conditions": [{"type": "Deployed", "status": "True", "reason": "InstallSuccessful",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "deployedRelease": {"name": "m", "manifest": MANIFEST}}


async def test_deletion_uninstalls_then_removes_the_finalizer(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    helm.script("info", info(1)).script("uninstall", True)
    cr(cluster, finalizers=[FINALIZER], status=deployed_status(), deleting=True)
    reconciler = make(cluster, helm)
    patches: list[dict[str, Any]] = []
    original = cluster.patch_status

    def spy(*args: Any) -> dict[str, Any] | None:
        patches.append(args[3])
        return original(*args)

    cluster.patch_status = spy  # type: ignore[method-assign]
    assert await reconciler.reconcile("ns", "m") == Outcome()
    assert helm.called() == ["info", "uninstall"]
    assert [w.verb for w in cluster.writes] == ["patch_status", "set_finalizer"]
    status = patches[0]["status"]
    assert status["deployedRelease"] is None
    assert (status["conditions"][0]["status"], status["conditions"][0]["reason"]) == ("False", "UninstallSuccessful")
    assert cluster.stored("Memcached", "ns", "m") is None


async def test_a_failed_uninstall_keeps_the_finalizer(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    helm.script("info", info(1))
    helm.script("uninstall", HelmError(HelmErrorKind.OTHER, "uninstall: failed to delete", "uninstall"))
    cr(cluster, finalizers=[FINALIZER], status=deployed_status(), deleting=True)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert stored(cluster)["metadata"]["finalizers"] == [FINALIZER]
    assert conditions(cluster)["ReleaseFailed"][:2] == ("True", "UninstallError")


async def test_deletion_without_our_finalizer_does_nothing(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    cr(cluster, finalizers=["someone.else/finalizer"], deleting=True)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome()
    assert helm.calls == [] and cluster.writes == []


async def test_uninstall_wait_keeps_the_finalizer_until_the_objects_are_gone(cluster: FakeCluster,
                                                                            helm: FakeHelmClient) -> None:
    helm.script("info", info(1)).script("uninstall", True)
    cr(cluster, finalizers=[FINALIZER], status=deployed_status(), deleting=True,
       annotations={P + "uninstall-wait": "true"})
    config_map(cluster)
    cluster.stored("ConfigMap", "ns", "m-config")["metadata"]["finalizers"] = ["x"]  # type: ignore[index]
    reconciler = make(cluster, helm)
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=1.0)
    assert [w.verb for w in cluster.writes] == ["delete", "patch_status"]
    assert stored(cluster)["metadata"]["finalizers"] == [FINALIZER]
    assert conditions(cluster)["Deployed"][:2] == ("False", "UninstallSuccessful")
    assert stored(cluster)["status"]["deployedRelease"]["name"] == "m", "kept while waiting"

    del cluster.objects[("", "ConfigMap", "ns", "m-config")]
    helm.script("info", not_found())
    assert await reconciler.reconcile("ns", "m") == Outcome()
    assert cluster.stored("Memcached", "ns", "m") is None


# -- annotations, cancellation ------------------------------------------------------------------------


async def test_a_bad_reconcile_period_is_irreconcilable_without_helm(cluster: FakeCluster,
                                                                     helm: FakeHelmClient) -> None:
    cr(cluster, annotations={P + "reconcile-period": "soon"})
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert helm.calls == []
    assert conditions(cluster)["Irreconcilable"][:2] == ("True", "ReconcileError")
    assert [w.verb for w in cluster.writes] == ["patch_status"]


async def test_the_reconcile_period_annotation_sets_the_requeue(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    helm.script("info", not_found()).script("install", rendered(MANIFEST, 1, "deployed"))
    cr(cluster, finalizers=[FINALIZER], annotations={P + "reconcile-period": "5s"})
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(requeue_after=5.0)


async def test_a_cancelled_helm_call_is_reported_in_the_status(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    held = Held(rendered(MANIFEST, 1, "deployed"))
    helm.script("info", not_found()).script("install", held)
    cr(cluster, finalizers=[FINALIZER])
    reconciler = make(cluster, helm)
    task = asyncio.create_task(reconciler.reconcile("ns", "m"))
    await asyncio.wait_for(held.started.wait(), 5)
    reconciler.cancel.cancel("the operator is shutting down")
    assert await asyncio.wait_for(task, 5) == Outcome(failed=True)
    assert conditions(cluster)["Irreconcilable"][2] == "the run was cancelled: the operator is shutting down"
    assert len(cluster.status_patches()) == 1


async def test_an_api_error_defers_the_reconcile_without_a_status_write(cluster: FakeCluster,
                                                                        helm: FakeHelmClient) -> None:
    cr(cluster)
    cluster.fail("set_finalizer", errors.TemporaryError("could not update finalizers", delay=2))
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True, retry_after=2)
    assert cluster.status_patches() == [] and helm.calls == []
