"""Issue 13 items 2 and 3: the operator acts only on releases its kind made.

A release of the same name made by another Helm kind or installed by hand is reported, never
upgraded, recovered or uninstalled (deleting the resource leaves it in place); an install that finds
the release already made (by a helm process that raced it) reads the state again instead of
uninstalling what the other process made; helm-annotated children bring back only the kind that
made their release.  Written against names that already existed before the fix (the owner label is
spelled out), so that they run, and fail, on the code before it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.config.model import GroupVersionKind, HelmWatch
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller import dependents
from hybrid_operator.controller.reconcile import Outcome
from hybrid_operator.helm import values
from hybrid_operator.helm.client import HelmError, HelmErrorKind, Release, ReleaseInfo, classify
from hybrid_operator.helm.reconciler import FINALIZER, HelmReconciler
from hybrid_operator.helm.release import INPUTS_LABEL, inputs_label
from support.fakes import FakeCluster, FakeHelmClient

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")
OWNER_LABEL = "hybrid-operator.dev/owner"
OURS = "Memcached.cache.example.com"
DIGEST = "c" * 64
SPEC = {"size": 2}
INPUTS = values.inputs_digest(DIGEST, SPEC)
DRY_RUN = FakeHelmClient.DRY_RUN
MANIFEST = """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: m-config
data:
  size: "2"
"""
#: helm v4's answer to an install of a name in use (helm v3 spelled it "re-use")
NAME_IN_USE = "INSTALLATION FAILED: release name check failed: cannot reuse a name that is still in use"


def release_info(revision: int = 1, status: str = "deployed", *, chart: str = "memcached",
                 **labels: str) -> ReleaseInfo:
    return ReleaseInfo("m", revision, status, labels=dict(labels), chart=chart)


def owned_by(owner: str, revision: int = 1, status: str = "deployed") -> ReleaseInfo:
    return release_info(revision, status, **{OWNER_LABEL: owner, INPUTS_LABEL: inputs_label(INPUTS, revision)})


def not_found() -> HelmError:
    return HelmError(HelmErrorKind.NOT_FOUND, "release: not found", "get metadata")


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add_kind(GVK.group, GVK.version, GVK.kind, "memcacheds")
    cluster.add_kind("", "v1", "ConfigMap", "configmaps")
    return cluster


@pytest.fixture
def helm() -> FakeHelmClient:
    return FakeHelmClient()


def make(cluster: FakeCluster, helm: FakeHelmClient) -> HelmReconciler:
    watch = HelmWatch(gvk=GVK, chart=Path("/charts/memcached"))
    settings = Settings(reconcile_period=timedelta(minutes=1))
    return HelmReconciler(watch, cluster, helm, settings, asyncio.Semaphore(1), DIGEST)  # type: ignore[arg-type]


def cr(cluster: FakeCluster, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m", "namespace": "ns", "generation": 1, "finalizers": [FINALIZER]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return cluster.create({"apiVersion": GVK.api_version, "kind": GVK.kind, "metadata": meta, "spec": dict(SPEC)})


def conditions(cluster: FakeCluster) -> dict[str, tuple[str, str, str]]:
    found = cluster.stored("Memcached", "ns", "m")
    listed = (found or {}).get("status", {}).get("conditions", [])
    return {c["type"]: (c["status"], c.get("reason", ""), c.get("message", "")) for c in listed}


CHANGING = ("install", "upgrade", "rollback", "uninstall")


@pytest.mark.parametrize(("latest", "named"), [
    pytest.param(release_info(chart="redis"), "chart redis", id="installed by hand, another chart"),
    pytest.param(release_info(), "not installed by this operator", id="installed by hand, the same chart"),
    pytest.param(owned_by("Cache.other.example.com"), "Cache.other.example.com", id="made by another kind"),
])
async def test_a_release_that_is_not_ours_is_reported_and_left_alone(cluster: FakeCluster, helm: FakeHelmClient,
                                                                     latest: ReleaseInfo, named: str) -> None:
    helm.script("info", latest)
    cr(cluster)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert helm.called() == ["info"], "nothing but the read: no dry-run, no upgrade, no recovery"
    state, reason, message = conditions(cluster)["Irreconcilable"]
    assert (state, reason) == ("True", "ReconcileError")
    assert message.startswith("duplicate release name: found existing release with name 'm'") and named in message


async def test_a_pending_release_of_another_kind_is_not_recovered(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    helm.script("info", owned_by("Cache.other.example.com", 2, "pending-upgrade"))
    cr(cluster)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert not set(helm.called()) & set(CHANGING)


async def test_a_release_of_an_earlier_version_of_ours_is_still_ours(cluster: FakeCluster,
                                                                    helm: FakeHelmClient) -> None:
    """Releases made before the owner label existed carry only the inputs label (and our chart)."""
    legacy = release_info(**{INPUTS_LABEL: inputs_label(INPUTS, 1)})
    helm.script("info", legacy).script(DRY_RUN, Release("m", 2, "pending-upgrade", MANIFEST))
    helm.script("manifest", MANIFEST)
    cr(cluster)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(requeue_after=60.0)
    assert conditions(cluster)["Deployed"][0] == "True"


async def test_deleting_the_resource_leaves_a_release_that_is_not_ours(cluster: FakeCluster,
                                                                       helm: FakeHelmClient) -> None:
    helm.script("info", release_info(chart="redis"))
    cr(cluster, deleting=True)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome()
    assert "uninstall" not in helm.called()
    assert cluster.stored("Memcached", "ns", "m") is None, "the finalizer went: the resource is not stuck"
    assert [(e.type, e.reason) for e in cluster.events] == [("Warning", "ReleaseNotOwned")]
    assert "left in place" in cluster.events[0].message


async def test_an_install_that_finds_the_release_made_reads_the_state_again(cluster: FakeCluster,
                                                                          helm: FakeHelmClient) -> None:
    """A helm process that outlived the previous operator deployed the release meanwhile: it is not
    uninstalled (3,000 objects deleted and made again), its state is read and repaired."""
    in_use = HelmError(classify(f"Error: {NAME_IN_USE}"), NAME_IN_USE, "install")
    helm.script("info", not_found()).script("install", in_use)
    helm.script("info", owned_by(OURS)).script(DRY_RUN, Release("m", 2, "pending-upgrade", MANIFEST))
    helm.script("manifest", MANIFEST)
    cr(cluster)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(requeue_after=60.0)
    assert helm.called() == ["info", "install", "info", DRY_RUN, "manifest"]
    assert conditions(cluster)["Deployed"][0] == "True"


async def test_an_install_that_finds_a_release_of_another_kind_reports_it(cluster: FakeCluster,
                                                                        helm: FakeHelmClient) -> None:
    in_use = HelmError(classify(f"Error: {NAME_IN_USE}"), NAME_IN_USE, "install")
    helm.script("info", not_found()).script("install", in_use).script("info", owned_by("Cache.other.example.com"))
    cr(cluster)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert not set(helm.called()) & {"uninstall", "upgrade", "rollback"}
    assert "Cache.other.example.com" in conditions(cluster)["Irreconcilable"][2]


async def test_a_failed_install_leaves_a_release_another_process_deployed(cluster: FakeCluster,
                                                                         helm: FakeHelmClient) -> None:
    failure = HelmError(HelmErrorKind.OTHER, "context deadline exceeded", "install")
    helm.script("info", not_found()).script("install", failure).script("info", owned_by(OURS))
    cr(cluster)
    assert await make(cluster, helm).reconcile("ns", "m") == Outcome(failed=True)
    assert "uninstall" not in helm.called()


async def test_releases_made_carry_the_owner_label(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    helm.script("info", not_found()).script("install", Release("m", 1, "deployed", MANIFEST))
    cr(cluster)
    await make(cluster, helm).reconcile("ns", "m")
    assert helm.calls[1].args["options"].labels[OWNER_LABEL] == OURS


def test_helm_says_a_name_is_in_use_in_both_spellings() -> None:
    for text in (NAME_IN_USE, "INSTALLATION FAILED: cannot re-use a name that is still in use"):
        assert classify(text) not in (HelmErrorKind.OTHER, HelmErrorKind.NOT_FOUND), text


# -- dependents: a child brings back only the kind that made its release -----------------------------------


def test_helm_children_map_only_to_the_kind_that_made_the_release() -> None:
    ours, theirs = ("cache.example.com", "Memcached"), ("other.example.com", "Cache")
    child = {"metadata": {"name": "m-config", "namespace": "ns", "annotations": {
        dependents.HELM_RELEASE_NAME: "m", dependents.HELM_RELEASE_NAMESPACE: "ns"}}}
    releases = dependents.ReleaseOwners()
    assert dependents.owners_of(child, set(), {ours, theirs}, releases) == [], "nobody claimed it yet"
    releases.record("ns", "m", ours)
    assert dependents.owners_of(child, set(), {ours, theirs}, releases) == [(ours, "ns", "m")]
    releases.forget("ns", "m", theirs)
    assert releases.owner("ns", "m") == ours, "only the owner forgets its release"


async def test_the_reconciler_records_which_kind_made_the_release(cluster: FakeCluster,
                                                                 helm: FakeHelmClient) -> None:
    helm.script("info", not_found()).script("install", Release("m", 1, "deployed", MANIFEST))
    helm.script("info", owned_by("Cache.other.example.com"))
    cr(cluster)
    reconciler = make(cluster, helm)
    reconciler.releases = dependents.ReleaseOwners()
    await reconciler.reconcile("ns", "m")
    assert reconciler.releases.owner("ns", "m") == ("cache.example.com", "Memcached")
    await reconciler.reconcile("ns", "m")
    assert reconciler.releases.owner("ns", "m") is None
