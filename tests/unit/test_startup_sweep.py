"""Issue 13 item 6: what an operator killed mid-run left behind is cleared when the next one starts.

Run credentials, the scratch directory (run private data dirs holding the spec, the kubernetes
client's CA files) and the artifact directories of resources deleted while no operator ran -- but
only when no other live operator shares the artifacts directory, only below this operator's own
kinds and namespaces, only for resources the API says are gone, never through a symlink, and
nothing when the API cannot list them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hybrid_operator import errors
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind
from hybrid_operator.manager import startup
from support.fakes import FakeCluster

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("web.example.com", "v1alpha1", "Website")
WATCH = AnsibleWatch(gvk=GVK, playbook=Path("/nowhere/site.yml"))


def run_dir(root: Path, namespace: str, name: str, kind: str = "Website") -> Path:
    resource = root / "web.example.com" / "v1alpha1" / kind / namespace / name
    directory = resource / "artifacts" / "20260101T000000000000Z-0a"
    directory.mkdir(parents=True)
    (directory / "stdout").write_text("spec: secret-ish\n")
    return directory.parent.parent


def cluster_with(*names: tuple[str, str]) -> FakeCluster:
    cluster = FakeCluster()
    cluster.add_kind(GVK.group, GVK.version, GVK.kind, "websites")
    for namespace, name in names:
        cluster.create({"apiVersion": GVK.api_version, "kind": GVK.kind,
                        "metadata": {"name": name, "namespace": namespace}})
    return cluster


def test_artifacts_of_deleted_resources_go_and_the_others_stay(tmp_path: Path) -> None:
    live, gone = run_dir(tmp_path, "ns", "live"), run_dir(tmp_path, "ns", "gone")
    other_ns = run_dir(tmp_path, "other", "gone")
    other_kind = run_dir(tmp_path, "ns", "gone", kind="Database")
    removed = startup.sweep_artifacts(cluster_with(("ns", "live")), [WATCH], tmp_path, ())  # type: ignore[arg-type]
    assert sorted(removed) == sorted([gone, other_ns])
    assert live.is_dir() and other_kind.is_dir(), "another kind's directories are not ours to judge"
    assert not (tmp_path / "web.example.com" / "v1alpha1" / "Website" / "other").exists()


def test_only_the_watched_namespaces_are_swept(tmp_path: Path) -> None:
    mine, theirs = run_dir(tmp_path, "ns", "gone"), run_dir(tmp_path, "elsewhere", "gone")
    startup.sweep_artifacts(cluster_with(), [WATCH], tmp_path, ("ns",))  # type: ignore[arg-type]
    assert not mine.exists() and theirs.is_dir()


def test_nothing_is_removed_when_the_resources_cannot_be_listed(tmp_path: Path) -> None:
    gone = run_dir(tmp_path, "ns", "gone")
    cluster = cluster_with()
    cluster.fail("list", errors.Unreachable("API server unreachable"))
    assert startup.sweep_artifacts(cluster, [WATCH], tmp_path, ()) == []  # type: ignore[arg-type]
    assert gone.is_dir()


def test_unexpected_content_and_symlinks_are_left_alone(tmp_path: Path) -> None:
    odd = run_dir(tmp_path, "ns", "odd")
    (odd / "notes.txt").write_text("someone else's")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "artifacts").mkdir()
    (tmp_path / "web.example.com" / "v1alpha1" / "Website" / "ns" / "linked").symlink_to(outside)
    startup.sweep_artifacts(cluster_with(), [WATCH], tmp_path, ())  # type: ignore[arg-type]
    assert odd.is_dir() and (outside / "artifacts").is_dir()


def leftovers(root: Path) -> list[Path]:
    credentials = root / "run-credentials" / "0123abcd"
    credentials.mkdir(parents=True)
    (credentials / "kubeconfig").write_text("token: t")
    private = root / "tmp" / "hybrid-operator-run-x"
    private.mkdir(parents=True)
    (private / "extravars.json").write_text('{"password": "p"}')
    ca = root / "tmp" / "tmpca"
    ca.write_text("-----BEGIN CERTIFICATE-----")
    return [credentials, private, ca]


def test_a_lone_operator_sweeps_run_credentials_and_scratch_files(tmp_path: Path) -> None:
    left = leftovers(tmp_path)
    lock = startup.ArtifactsLock(tmp_path)
    try:
        assert lock.alone
        startup.sweep_local(lock)
    finally:
        lock.close()
    assert not any(path.exists() for path in left)
    assert (tmp_path / "tmp").is_dir() and (tmp_path / "tmp").stat().st_mode & 0o077 == 0


def test_nothing_is_swept_while_another_operator_uses_the_directory(tmp_path: Path) -> None:
    left = leftovers(tmp_path)
    first = startup.ArtifactsLock(tmp_path)
    first.share()
    second = startup.ArtifactsLock(tmp_path)
    try:
        assert not second.alone
        startup.sweep_local(second)
        second.share()
    finally:
        first.close()
        second.close()
    assert all(path.exists() for path in left)
    third = startup.ArtifactsLock(tmp_path)
    assert third.alone, "both gone (closed, or killed): the next one sweeps"
    third.close()


def test_the_lock_is_not_inherited_by_children(tmp_path: Path) -> None:
    import os

    lock = startup.ArtifactsLock(tmp_path)
    try:
        assert not os.get_inheritable(lock._fd)
    finally:
        lock.close()
