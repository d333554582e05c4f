"""Unit tests for cheap no-change Helm resyncs (hybrid_operator.helm.resync, chartscan), through fakes.

A full reconcile that finds the deployed revision unchanged leaves a record; the next resync with
the same inputs must then cost no helm process and no apply, unless helm's record of the release in
the cluster (its storage Secret) changed, the inputs changed, the chart calls ``lookup``, or objects
drifted (then only those are applied). The dependent watches' view is a fake that sees what the
FakeCluster holds, as a synced informer would.
"""

from __future__ import annotations

import asyncio
import io
import tarfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.config.model import GroupVersionKind, HelmWatch
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller.dependents import UNSEEN, ChildKind, DependentWatches, Seen, essence
from hybrid_operator.controller.reconcile import Outcome
from hybrid_operator.helm import values
from hybrid_operator.helm.chartscan import UNKNOWN, ChartScan, scan_chart
from hybrid_operator.helm.client import Release, ReleaseInfo
from hybrid_operator.helm.ownership import OWNER_LABEL
from hybrid_operator.helm.reconciler import FINALIZER, HelmReconciler
from hybrid_operator.helm.release import INPUTS_LABEL, inputs_label
from hybrid_operator.helm.resync import contains, storage_kind
from hybrid_operator.kube.client import ResourceRef
from support.fakes import FakeCluster, FakeHelmClient

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")
DIGEST = "d" * 64
SPEC = {"size": 2}
INPUTS = values.inputs_digest(DIGEST, SPEC)
DRY_RUN = FakeHelmClient.DRY_RUN
OWNER = "Memcached.cache.example.com"
CLEAN = ChartScan(lookup=False, tpl=False)

MANIFEST = """---
# Source: memcached/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: m-config
data:
  size: "2"
---
# Source: memcached/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: m
spec:
  ports:
  - port: 11211
    name: memcache
"""


class FakeLive:
    """The dependent watches' view, as a synced informer would hold it: the essence of what is stored."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def seen(self, child: ChildKind, namespace: str, name: str) -> Seen:
        found = self.cluster.stored(child.kind, namespace, name)
        return Seen(True, None if found is None else essence(found))


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add_kind(GVK.group, GVK.version, GVK.kind, "memcacheds")
    cluster.add_kind("", "v1", "ConfigMap", "configmaps")
    cluster.add_kind("", "v1", "Service", "services")
    cluster.add_kind("", "v1", "Secret", "secrets")
    return cluster


@pytest.fixture
def helm() -> Iterator[FakeHelmClient]:
    fake = FakeHelmClient()
    yield fake
    assert fake.unused() == {}, "every scripted helm answer was asked for"


def make(cluster: FakeCluster, helm: FakeHelmClient, scan: ChartScan = CLEAN,
         live: bool = True, environ: dict[str, str] | None = None) -> HelmReconciler:
    spec = HelmWatch(gvk=GVK, chart=Path("/charts/memcached"))
    settings = Settings(reconcile_period=timedelta(minutes=1), environ=environ or {})
    reconciler = HelmReconciler(spec, cluster, helm, settings, asyncio.Semaphore(1), DIGEST,  # type: ignore[arg-type]
                                chart_scan=scan)
    reconciler.resyncer.live = FakeLive(cluster) if live else None
    return reconciler


def cr(cluster: FakeCluster, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return cluster.create({"apiVersion": GVK.api_version, "kind": GVK.kind,
                           "metadata": {"name": "m", "namespace": "ns", "finalizers": [FINALIZER], "generation": 1},
                           "spec": dict(spec or SPEC)})


def record(cluster: FakeCluster, revision: int, status: str = "deployed", inputs: str = INPUTS,
           uid: str | None = None) -> dict[str, Any]:
    """helm's storage Secret of one revision (only its labels matter here)."""
    meta: dict[str, Any] = {"name": f"sh.helm.release.v1.m.v{revision}", "namespace": "ns",
                            "labels": {"owner": "helm", "name": "m", "status": status, "version": str(revision),
                                       INPUTS_LABEL: inputs_label(inputs, revision), OWNER_LABEL: OWNER}}
    if uid:
        meta["uid"] = uid
    key = ("", "Secret", "ns", meta["name"])
    cluster.objects.pop(key, None)
    return cluster.create({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1", "metadata": meta})


def full_resync(helm: FakeHelmClient, revision: int = 1, manifest: str = MANIFEST, inputs: str = INPUTS) -> None:
    labels = {INPUTS_LABEL: inputs_label(inputs, revision), OWNER_LABEL: OWNER}
    helm.script("info", ReleaseInfo("m", revision, "deployed", labels=labels))
    helm.script(DRY_RUN, Release("m", revision + 1, "pending-upgrade", manifest, "the notes"))
    helm.script("manifest", manifest)


def applied(cluster: FakeCluster) -> list[str]:
    return [f"{w.kind}/{w.name}" for w in cluster.writes_of("apply")]


async def verified(cluster: FakeCluster, helm: FakeHelmClient, **kwargs: Any) -> HelmReconciler:
    """A release at revision 1 that one full reconcile found unchanged (and repaired: 2 objects created)."""
    cr(cluster)
    record(cluster, 1)
    reconciler = make(cluster, helm, **kwargs)
    full_resync(helm)
    assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=60.0)
    assert applied(cluster) == ["ConfigMap/m-config", "Service/m"]
    cluster.writes.clear()
    cluster.events.clear()
    helm.calls.clear()
    return reconciler


async def test_a_no_change_resync_runs_no_helm_and_applies_nothing(cluster: FakeCluster,
                                                                  helm: FakeHelmClient) -> None:
    reconciler = await verified(cluster, helm)
    reads = len(cluster.reads)
    for _ in range(3):
        assert await reconciler.reconcile("ns", "m") == Outcome(requeue_after=60.0)
    assert helm.calls == []
    assert cluster.writes == [] and cluster.events == []
    # per resync: the CR, helm's record of the revision and of the next one; nothing per object
    assert len(cluster.reads) - reads == 3 * 3
    status = cluster.stored("Memcached", "ns", "m")["status"]  # type: ignore[index]
    deployed = next(c for c in status["conditions"] if c["type"] == "Deployed")
    assert (deployed["reason"], deployed["message"]) == ("InstallSuccessful", "the notes")
    assert status["deployedRelease"] == {"name": "m", "manifest": MANIFEST}


async def test_a_changed_value_renders_and_upgrades(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    reconciler = await verified(cluster, helm)
    stored = cluster.stored("Memcached", "ns", "m")
    assert stored is not None
    stored["spec"] = {"size": 3}
    changed = MANIFEST.replace('"2"', '"3"')
    helm.script("info", ReleaseInfo("m", 1, "deployed", labels={INPUTS_LABEL: inputs_label(INPUTS, 1),
                                                                 OWNER_LABEL: OWNER}))
    helm.script(DRY_RUN, Release("m", 2, "pending-upgrade", changed)).script("manifest", MANIFEST)
    helm.script("upgrade", Release("m", 2, "deployed", changed))
    await reconciler.reconcile("ns", "m")
    assert helm.called() == ["info", DRY_RUN, "manifest", "upgrade"]
    options = helm.calls[-1].args["options"]
    assert options.labels[INPUTS_LABEL] == inputs_label(values.inputs_digest(DIGEST, {"size": 3}), 2)


async def test_a_chart_calling_lookup_renders_on_every_resync(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    cr(cluster)
    record(cluster, 1)
    reconciler = make(cluster, helm, scan=ChartScan(lookup=True, tpl=False))
    for _ in range(2):
        full_resync(helm)
        await reconciler.reconcile("ns", "m")
    assert helm.called() == ["info", DRY_RUN, "manifest"] * 2
    assert applied(cluster) == ["ConfigMap/m-config", "Service/m"] * 2


async def test_values_mentioning_lookup_render_when_the_chart_calls_tpl(cluster: FakeCluster,
                                                                        helm: FakeHelmClient) -> None:
    spec = {"size": 2, "extra": "{{ lookup \"v1\" \"Secret\" \"ns\" \"x\" }}"}
    inputs = values.inputs_digest(DIGEST, spec)
    cr(cluster, spec)
    record(cluster, 1, inputs=inputs)
    reconciler = make(cluster, helm, scan=ChartScan(lookup=False, tpl=True))
    for _ in range(2):
        full_resync(helm, inputs=inputs)
        await reconciler.reconcile("ns", "m")
    assert helm.called() == ["info", DRY_RUN, "manifest"] * 2


async def test_an_edited_object_alone_is_applied_again(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    reconciler = await verified(cluster, helm)
    edited = cluster.stored("ConfigMap", "ns", "m-config")
    assert edited is not None
    edited["data"] = {"size": "99"}
    await reconciler.reconcile("ns", "m")
    assert helm.calls == []
    assert applied(cluster) == ["ConfigMap/m-config"]
    assert cluster.stored("ConfigMap", "ns", "m-config")["data"] == {"size": "2"}  # type: ignore[index]
    assert cluster.events == []  # repaired, not re-created

    # a change that keeps everything of the manifest (another manager's annotation) is read, not applied
    cluster.writes.clear()
    service = cluster.stored("Service", "ns", "m")
    assert service is not None
    service["metadata"]["annotations"]["someone.example.com/note"] = "x"
    reads = len(cluster.reads)
    await reconciler.reconcile("ns", "m")
    assert applied(cluster) == []
    assert ("get", "Service", "ns", "m") in cluster.reads[reads:]
    reads = len(cluster.reads)
    await reconciler.reconcile("ns", "m")
    assert ("get", "Service", "ns", "m") not in cluster.reads[reads:], "its new essence is the verified one"


async def test_a_missing_object_is_created_and_announced(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    reconciler = await verified(cluster, helm)
    del cluster.objects[("", "Service", "ns", "m")]
    outcome = await reconciler.reconcile("ns", "m")
    assert outcome == Outcome(requeue_after=60.0)
    assert helm.calls == []
    assert applied(cluster) == ["Service/m"]
    body = cluster.writes_of("apply")[0].body
    assert body["field_manager"] == "helm"
    assert body["body"]["metadata"]["annotations"]["meta.helm.sh/release-name"] == "m"
    assert [(e.reason, e.message) for e in cluster.events] == [("DriftRepaired", "re-created Service m")]


async def test_without_a_view_of_the_objects_they_are_read(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    reconciler = await verified(cluster, helm, live=False)
    reads = len(cluster.reads)
    await reconciler.reconcile("ns", "m")
    assert helm.calls == [] and applied(cluster) == []
    assert sorted(r[1] for r in cluster.reads[reads:]) == ["ConfigMap", "Memcached", "Secret", "Secret", "Service"]
    del cluster.objects[("", "ConfigMap", "ns", "m-config")]
    await reconciler.reconcile("ns", "m")
    assert applied(cluster) == ["ConfigMap/m-config"]


@pytest.mark.parametrize("change", ["newer revision", "pending", "reinstalled", "inputs label", "gone"])
async def test_a_changed_release_record_means_a_full_reconcile(cluster: FakeCluster, helm: FakeHelmClient,
                                                               change: str) -> None:
    reconciler = await verified(cluster, helm)
    if change == "newer revision":
        record(cluster, 2, status="pending-upgrade")
    elif change == "pending":
        record(cluster, 1, status="pending-rollback", uid=cluster.stored("Secret", "ns", "sh.helm.release.v1.m.v1")
               ["metadata"]["uid"])  # type: ignore[index]
    elif change == "reinstalled":
        record(cluster, 1)  # same name and labels, a new object: uninstalled and installed again
    elif change == "inputs label":
        record(cluster, 1, inputs="0" * 64, uid=cluster.stored("Secret", "ns", "sh.helm.release.v1.m.v1")
               ["metadata"]["uid"])  # type: ignore[index]
    else:
        del cluster.objects[("", "Secret", "ns", "sh.helm.release.v1.m.v1")]
    helm.script("info", ReleaseInfo("m", 1, "deployed", labels={INPUTS_LABEL: inputs_label(INPUTS, 1),
                                                                 OWNER_LABEL: OWNER}))
    helm.script(DRY_RUN, Release("m", 2, "pending-upgrade", MANIFEST)).script("manifest", MANIFEST)
    await reconciler.reconcile("ns", "m")
    assert helm.called() == ["info", DRY_RUN, "manifest"]


async def test_a_restarted_operator_renders_once_then_resyncs_cheaply(cluster: FakeCluster,
                                                                      helm: FakeHelmClient) -> None:
    await verified(cluster, helm)
    restarted = make(cluster, helm)
    full_resync(helm)
    await restarted.reconcile("ns", "m")
    await restarted.reconcile("ns", "m")
    assert helm.called() == ["info", DRY_RUN, "manifest"]


async def test_a_nondeterministic_chart_keeps_its_flag_without_rendering(cluster: FakeCluster,
                                                                         helm: FakeHelmClient) -> None:
    cr(cluster)
    record(cluster, 1)
    reconciler = make(cluster, helm)
    helm.script("info", ReleaseInfo("m", 1, "deployed", labels={INPUTS_LABEL: inputs_label(INPUTS, 1),
                                                                 OWNER_LABEL: OWNER}))
    helm.script(DRY_RUN, Release("m", 2, "pending-upgrade", MANIFEST.replace('"2"', '"7"')))
    helm.script("manifest", MANIFEST)
    await reconciler.reconcile("ns", "m")
    patches = len(cluster.status_patches())
    await reconciler.reconcile("ns", "m")
    assert helm.called() == ["info", DRY_RUN, "manifest"]
    assert len(cluster.status_patches()) == patches
    conditions = {c["type"]: c["status"] for c in cluster.stored("Memcached", "ns", "m")["status"]["conditions"]}  # type: ignore[index]
    assert conditions["NondeterministicRender"] == "True"
    assert [e.reason for e in cluster.events].count("NondeterministicRender") == 1


async def test_deletion_forgets_the_record(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    reconciler = await verified(cluster, helm)
    stored = cluster.stored("Memcached", "ns", "m")
    assert stored is not None
    stored["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    helm.script("info", ReleaseInfo("m", 1, "deployed", labels={OWNER_LABEL: OWNER})).script("uninstall", True)
    await reconciler.reconcile("ns", "m")
    assert reconciler.resyncer._records == {}


def test_storage_kind_follows_helm_driver() -> None:
    assert storage_kind({}) == "Secret"
    assert storage_kind({"HELM_DRIVER": "configmap"}) == "ConfigMap"
    assert storage_kind({"HELM_DRIVER": "memory"}) is None
    assert storage_kind({"HELM_DRIVER": "sql"}) is None


async def test_a_driver_outside_the_cluster_always_renders(cluster: FakeCluster, helm: FakeHelmClient) -> None:
    cr(cluster)
    reconciler = make(cluster, helm, environ={"HELM_DRIVER": "memory"})
    for _ in range(2):
        full_resync(helm)
        await reconciler.reconcile("ns", "m")
    assert helm.called() == ["info", DRY_RUN, "manifest"] * 2


# -- what the dependent watches know ------------------------------------------------------------


def test_the_dependent_watches_know_an_object_only_while_listed_and_followed() -> None:
    ref = ResourceRef("", "v1", "ConfigMap", "configmaps", True, False)
    kind = ChildKind("", "v1", "ConfigMap")
    watches = DependentWatches(None, lambda *_: None)  # type: ignore[arg-type]
    assert watches.seen(kind, "ns", "a") == UNSEEN
    from hybrid_operator.controller.dependents import _Watch

    watch = _Watch(kind, lambda *_: None)
    watches._watches[kind] = watch
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}, "data": {}}
    watch.relisting(ref, "")
    watch.listed(ref, obj)
    assert not watches.seen(kind, "ns", "a").known, "not before the list is complete"
    watch.synced(ref, "")
    assert watches.seen(kind, "ns", "a") == Seen(True, essence(obj))
    assert watches.seen(kind, "ns", "b") == Seen(True, None)
    watch.changed(ref, "DELETED", obj)
    assert watches.seen(kind, "ns", "a") == Seen(True, None)
    watch.interrupted()
    assert watches.seen(kind, "ns", "a") == UNSEEN

    scoped = _Watch(kind, lambda *_: None)
    watches._watches[kind] = scoped
    scoped.relisting(ref, "ns")
    scoped.synced(ref, "ns")
    assert watches.seen(kind, "ns", "a").known and not watches.seen(kind, "other", "a").known


# -- the comparison -----------------------------------------------------------------------------


def test_contains_compares_what_the_manifest_sets() -> None:
    assert contains({"a": 1, "b": {"c": "x"}}, {"a": 1.0, "b": {"c": "x", "d": 2}, "e": 3})
    assert not contains({"a": 1}, {"a": 2})
    assert not contains({"a": {"c": "x"}}, {"a": {}})
    assert contains({"a": None, "b": {}, "c": []}, {})
    assert contains({"l": [{"port": 80}]}, {"l": [{"port": 80, "protocol": "TCP"}]})
    assert not contains({"l": [{"port": 80}]}, {"l": [{"port": 80}, {"port": 81}]})
    assert not contains({"a": True}, {"a": 1})
    assert not contains({"a": "1"}, {"a": 1})


# -- the chart scan -----------------------------------------------------------------------------


def chart(root: Path, templates: dict[str, str]) -> Path:
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    for name, text in templates.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def archive(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_plain_chart_does_not_render_live(tmp_path: Path) -> None:
    root = chart(tmp_path / "c", {"templates/cm.yaml": "data: {{ .Values.x }}\n",
                                  "README.md": "lookup tables are explained here\n"})
    assert scan_chart(root) == ChartScan(lookup=False, tpl=False)


@pytest.mark.parametrize("where", ["templates/cm.yaml", "templates/_helpers.tpl", "charts/sub/templates/x.yaml",
                                   "files/conf.txt"])
def test_lookup_anywhere_in_the_chart_is_found(tmp_path: Path, where: str) -> None:
    root = chart(tmp_path / "c", {where: '{{- $s := (lookup "v1" "Secret" .Release.Namespace "x") -}}\n'})
    assert scan_chart(root).lookup


def test_lookup_in_a_nested_subchart_archive_is_found(tmp_path: Path) -> None:
    inner = archive({"inner/templates/x.yaml": b'{{ (lookup "v1" "Namespace" "" "").items }}'})
    outer = archive({"outer/Chart.yaml": b"name: outer", "outer/charts/inner-0.1.0.tgz": inner})
    root = chart(tmp_path / "c", {})
    (root / "charts").mkdir()
    (root / "charts" / "outer-0.1.0.tgz").write_bytes(outer)
    assert scan_chart(root).lookup
    packed = tmp_path / "c.tgz"
    packed.write_bytes(archive({"c/charts/outer-0.1.0.tgz": outer}))
    assert scan_chart(packed).lookup


def test_an_unreadable_chart_counts_as_calling_lookup(tmp_path: Path) -> None:
    assert scan_chart(tmp_path / "missing") == UNKNOWN
    broken = tmp_path / "broken.tgz"
    broken.write_bytes(b"not an archive")
    assert scan_chart(broken) == UNKNOWN


def test_tpl_with_values_that_mention_lookup_renders_live(tmp_path: Path) -> None:
    scan = scan_chart(chart(tmp_path / "c", {"templates/x.yaml": "{{ tpl .Values.t . }}\n"}))
    assert scan == ChartScan(lookup=False, tpl=True)
    assert not scan.renders_live({"t": "{{ .Release.Name }}"})
    assert scan.renders_live({"t": '{{ lookup "v1" "Secret" "" "" }}'})
