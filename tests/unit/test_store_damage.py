"""The store's handling of a damaged ``state.db`` (issue 28 item 8), on files made by the store itself.

The server-level attacks are in ``tests/security/test_cluster_data_on_disk.py``; these pin the store's
own rules: undecodable rows of each table are quarantined with their reason and key, a quarantine
moves the resourceVersion on and drops the watch history before it, a quarantined row stays where it
was moved on the next start (and is not reported again), and an empty file or an orphan write-ahead
log is refused with a :class:`StoreError` naming the file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.localcluster.storage.damage import StoreError
from hybrid_operator.localcluster.storage.store import Store

pytestmark = pytest.mark.unit

KEY = "/configmaps"


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}


def filled(path: Path, count: int = 5) -> int:
    """A store at ``path`` with ``count`` ConfigMaps, closed; its resourceVersion."""
    store = Store(path)
    for index in range(count):
        store.write(KEY, config_map(f"cm-{index}"), None)
    rv = store.rv
    store.close()
    return rv


def edit(path: Path, statement: str, *parameters: Any) -> None:
    db = sqlite3.connect(path)
    try:
        db.execute(statement, parameters)
        db.commit()
    finally:
        db.close()


@pytest.mark.parametrize(("body", "reason"), [
    ('{"metadata": {"na', "not JSON"),
    (b"\xff\xfe", "not UTF-8 text"),
    ("[1, 2]", "not an object with metadata"),
    ('{"metadata": {"name": "someone-else", "namespace": "default"}}', "not its key"),
])
def test_an_undecodable_object_row_is_quarantined(tmp_path: Path, body: str | bytes, reason: str) -> None:
    path = tmp_path / "state.db"
    rv = filled(path)
    edit(path, "UPDATE objects SET body = ? WHERE name = 'cm-2'", body)

    store = Store(path)
    try:
        assert [(q.source, q.key) for q in store.quarantined] == [("objects", "/configmaps/default/cm-2")]
        assert reason in store.quarantined[0].reason
        assert store.get(KEY, "default", "cm-2") is None and store.count(KEY) == 4
        assert store.rv == rv + 1, "the state changed without an event: a new resourceVersion"
        assert store.changes.since(rv) is None, "a watch resuming from before must get 410"
        assert store.changes.since(store.rv) == []
    finally:
        store.close()
    again = Store(path)
    try:
        assert again.quarantined == [] and again.count(KEY) == 4 and again.rv == rv + 1
    finally:
        again.close()
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT source, name, body FROM quarantine").fetchall()
    finally:
        db.close()
    assert rows == [("objects", "cm-2", body)]


def test_an_undecodable_change_is_quarantined_and_the_history_before_it_dropped(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    rv = filled(path)
    edit(path, "UPDATE events SET body = 'garbage' WHERE rv = ?", rv - 1)

    store = Store(path)
    try:
        assert [(q.source, q.key) for q in store.quarantined] == [("events", f"change at resourceVersion {rv - 1}")]
        assert store.count(KEY) == 5 and store.rv == rv
        assert store.changes.since(rv - 2) is None
        assert store.changes.since(rv - 1) is not None
    finally:
        store.close()


def test_a_counter_that_is_not_a_number_is_quarantined_and_recomputed(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    rv = filled(path)
    edit(path, "UPDATE meta SET value = 'x7' WHERE key = 'rv'")

    store = Store(path)
    try:
        assert [(q.source, q.key) for q in store.quarantined] == [("meta", "rv")]
        assert store.rv >= rv, "the resourceVersion must never go back"
    finally:
        store.close()


def test_an_empty_file_or_an_orphan_write_ahead_log_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty" / "state.db"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    with pytest.raises(StoreError, match=r"is empty \(0 bytes\).*--reset-data"):
        Store(empty)
    assert empty.stat().st_size == 0

    orphan = tmp_path / "orphan" / "state.db"
    orphan.parent.mkdir()
    orphan.with_name("state.db-wal").write_bytes(b"x" * 100)
    with pytest.raises(StoreError, match="is missing but its write-ahead log"):
        Store(orphan)
    assert not orphan.exists()

    reset = Store(empty, reset=True)
    try:
        assert reset.count(KEY) == 0
    finally:
        reset.close()
    assert len([p for p in empty.parent.glob("state.db.reset-*") if not p.name.endswith(("-wal", "-shm"))]) == 1


def test_a_new_store_file_is_never_left_empty(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = Store(path)
    store.close()
    assert path.stat().st_size > 0
    assert not list(tmp_path.glob(".state.db.new*"))
