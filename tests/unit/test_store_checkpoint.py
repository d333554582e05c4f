"""The embedded cluster's store checkpoints its write-ahead log when the server asks, not inside a commit.

SQLite's automatic checkpoint (every 1,000 WAL pages) ran in whichever commit crossed the line, and
its fsync made that request 20-30 ms slower: the slowest writes of the watch figures of ``make
bench-cluster``. The store now leaves the WAL to :meth:`Store.checkpoint`, which the server calls from
a thread every second; a large backstop stays in case nobody calls it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.localcluster.storage.store import Store

pytestmark = pytest.mark.unit


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"d": "x" * 2000}}


def test_commits_leave_the_wal_to_the_checkpoint(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    wal = tmp_path / "state.db-wal"
    try:
        for index in range(600):  # about 2,000 pages: twice SQLite's default automatic checkpoint
            store.write("/configmaps", config_map(f"cm-{index}"), None)
        grown = wal.stat().st_size

        frames = store.checkpoint()

        assert frames > 1000, "the commits did not checkpoint by themselves"
        for index in range(50):
            store.write("/configmaps", config_map(f"more-{index}"), None)
        assert wal.stat().st_size <= grown, "the WAL is reused from its start after a checkpoint"
    finally:
        store.close()
    reopened = Store(tmp_path / "state.db")
    try:
        assert reopened.count("/configmaps") == 650
    finally:
        reopened.close()


def test_an_in_memory_store_has_nothing_to_checkpoint() -> None:
    store = Store(None)
    store.write("/configmaps", config_map("cm"), None)
    assert store.checkpoint() == 0
