"""Unit tests of runners.artifacts: per-CR directory layout, rotation and removal (on a temp dir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybrid_operator.ansible import artifacts
from hybrid_operator.config.model import GroupVersionKind

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("cache.example.com", "v1", "Memcached")


@pytest.mark.parametrize(("gvk", "namespace", "expected"), [
    (GVK, "default", "cache.example.com/v1/Memcached/default/demo/artifacts"),
    (GroupVersionKind("", "v1", "Secret"), "default", "_core/v1/Secret/default/demo/artifacts"),
    (GVK, "", "cache.example.com/v1/Memcached/_cluster/demo/artifacts"),
])
def test_layout(gvk: GroupVersionKind, namespace: str, expected: str) -> None:
    root = Path("/root-dir")
    assert artifacts.artifacts_dir(root, gvk, namespace, "demo") == root / expected


@pytest.mark.parametrize("name", ["", "..", ".", "a/b"])
def test_unsafe_components_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="artifact path component"):
        artifacts.cr_dir(Path("/r"), GVK, "default", name)


def test_idents_are_unique_and_sort_by_creation() -> None:
    idents = [artifacts.new_ident() for _ in range(200)]
    assert len(set(idents)) == 200
    stamps = [ident.split("-")[0] for ident in idents]
    assert stamps == sorted(stamps)
    assert all(len(ident) == len(idents[0]) for ident in idents)


def make_runs(directory: Path, count: int) -> list[str]:
    names = [f"2026113{day}T101500000000Z-0000000{day}" for day in range(count)]
    for name in names:
        (directory / name).mkdir(parents=True)
    return names


@pytest.mark.parametrize(("count", "keep", "remaining"), [(5, 2, 2), (2, 5, 2), (5, 0, 5), (5, -1, 5)])
def test_rotate_keeps_the_newest(tmp_path: Path, count: int, keep: int, remaining: int) -> None:
    names = make_runs(tmp_path, count)
    removed = artifacts.rotate(tmp_path, keep, current=names[-1])

    left = sorted(path.name for path in tmp_path.iterdir())
    assert left == names[count - remaining:]
    assert len(removed) == count - remaining


def test_rotate_never_deletes_the_current_run_or_foreign_entries(tmp_path: Path) -> None:
    names = make_runs(tmp_path, 4)
    (tmp_path / "latest").mkdir()
    (tmp_path / "notes.txt").write_text("x")

    artifacts.rotate(tmp_path, 1, current=names[0])

    left = sorted(path.name for path in tmp_path.iterdir())
    assert left == sorted([names[0], names[-1], "latest", "notes.txt"])


def test_rotate_of_a_missing_directory_is_harmless(tmp_path: Path) -> None:
    assert artifacts.rotate(tmp_path / "missing", 3, current="x") == []


def test_remove_artifacts_removes_one_cr_and_empty_parents(tmp_path: Path) -> None:
    for name in ("demo", "other"):
        make_runs(artifacts.artifacts_dir(tmp_path, GVK, "default", name), 2)
    cr = {"apiVersion": "cache.example.com/v1", "kind": "Memcached",
          "metadata": {"name": "demo", "namespace": "default"}}

    assert artifacts.remove_artifacts(tmp_path, cr)
    assert not artifacts.cr_dir(tmp_path, GVK, "default", "demo").exists()
    assert artifacts.cr_dir(tmp_path, GVK, "default", "other").is_dir()

    other = {**cr, "metadata": {"name": "other", "namespace": "default"}}
    assert artifacts.remove_artifacts(tmp_path, other)
    assert list(tmp_path.iterdir()) == []
    assert not artifacts.remove_artifacts(tmp_path, other)
