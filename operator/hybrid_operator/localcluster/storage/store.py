"""Durable object storage for the embedded API server (SQLite, like k3s's default).

The store holds every object under its storage key (``group/plural``),
namespace and name, assigns the single, global, monotonically increasing
resourceVersion, and persists every change event next to the write that made
it, so the :class:`~.changes.ChangeFeed` (watch resume, live watchers)
survives a restart.  Every write is committed before it returns, so an
acknowledged write survives ``kill -9``.  Objects are also kept in memory, so
reads and LISTs never touch the disk.

Objects returned by :meth:`Store.get` are private copies; those yielded by
:meth:`Store.list` are the store's own and must not be mutated.
"""

from __future__ import annotations

import builtins
import collections
import copy
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hybrid_operator.localcluster import errors, files
from hybrid_operator.localcluster.storage.changes import Change, ChangeFeed

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects (
    skey TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    rv INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (skey, namespace, name)
);
CREATE TABLE IF NOT EXISTS events (
    rv INTEGER PRIMARY KEY, type TEXT NOT NULL, skey TEXT NOT NULL,
    body TEXT NOT NULL, old TEXT
);
"""



# etcd's default --max-request-bytes: kube-apiserver cannot store a larger object.
MAX_OBJECT_BYTES = 1536 * 1024
#: WAL pages after which a commit checkpoints by itself: only a backstop, the server checkpoints
#: in the background (:meth:`Store.checkpoint`) so that no request waits for it
BACKSTOP_CHECKPOINT_PAGES = 16384


class Store:
    """Objects by (storage key, namespace, name), persisted in SQLite."""

    def __init__(self, path: Path | None, history: int = 20000, history_bytes: int | None = 64 * 1024 * 1024) -> None:
        self._path = path
        self._db = self._open(path)
        self._checkpointer: sqlite3.Connection | None = None
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = collections.defaultdict(dict)
        self.changes = ChangeFeed(history, history_bytes)
        self.rv = 0
        self._load()

    @staticmethod
    def _open(path: Path | None) -> sqlite3.Connection:
        """The database, its file and SQLite's ``-wal``/``-shm`` companions all ``0600`` from their creation."""
        if path is None:
            db = sqlite3.connect(":memory:", isolation_level=None)
            db.executescript(SCHEMA)
            return db
        files.create_private(path)
        for companion in ("-wal", "-shm", "-journal"):
            files.tighten(path.with_name(path.name + companion), files.PRIVATE_FILE)
        with files.private_umask():  # SQLite creates -wal and -shm itself (with the database file's mode)
            db = sqlite3.connect(str(path), isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_CHECKPOINT_PAGES}")
            db.executescript(SCHEMA)
        return db

    # -- loading -----------------------------------------------------------------

    def _load(self) -> None:
        for skey, namespace, name, body in self._db.execute(
            "SELECT skey, namespace, name, body FROM objects"
        ):
            self._objects[skey][(namespace, name)] = json.loads(body)
        compacted_rv = int(self.get_meta("compacted_rv") or 0)
        events = self._db.execute("SELECT rv, type, skey, body, old FROM events ORDER BY rv").fetchall()
        self.changes.restore(
            (Change(rv, kind, skey, json.loads(body), json.loads(old) if old else None, len(body) + len(old or ""))
             for rv, kind, skey, body, old in events),
            compacted_rv,
        )
        self.rv = int(self.get_meta("rv") or 0)

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        self._db.close()

    def checkpoint(self) -> int:
        """Copy the WAL into the database file (SQLite's PASSIVE checkpoint); the WAL's frames now copied.

        Call it from a thread: it runs on a connection of its own, never waits for writers and never
        makes them wait, and its fsync no longer lands in a request (with SQLite's default automatic
        checkpoint every 1,000 pages, one commit in ~170 paid 20-30 ms for it: the slowest writes of
        ``make bench-cluster``'s watch figures). Nothing to do for an in-memory store.
        """
        if self._path is None:
            return 0
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(str(self._path), isolation_level=None, check_same_thread=False)
        _, _, copied = self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(copied)

    # -- reads -------------------------------------------------------------------

    def get(self, skey: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = self._objects.get(skey, {}).get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def peek(self, skey: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object itself, without a copy (shared, read-only): for existence checks."""
        return self._objects.get(skey, {}).get((namespace, name))

    def list(self, skey: str, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """Objects of one storage key, sorted by namespace then name (shared, read-only)."""
        objects = self._objects.get(skey, {})
        for key in sorted(objects):
            if namespace is None or key[0] == namespace:
                yield objects[key]

    def count(self, skey: str) -> int:
        return len(self._objects.get(skey, {}))

    def storage_keys(self) -> builtins.list[str]:
        return [skey for skey, objects in self._objects.items() if objects]

    # -- writes ------------------------------------------------------------------

    def write(self, skey: str, obj: dict[str, Any], old: dict[str, Any] | None) -> Change:
        """Store ``obj`` (new or replacing ``old``), bumping and setting its resourceVersion."""
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        rv = self.rv + 1
        previous_rv = meta.get("resourceVersion")
        meta["resourceVersion"] = str(rv)
        body = json.dumps(obj, separators=(",", ":"))
        if len(body) > MAX_OBJECT_BYTES:
            if previous_rv is None:
                meta.pop("resourceVersion")
            else:
                meta["resourceVersion"] = previous_rv
            raise errors.object_too_large()
        old_body = json.dumps(old, separators=(",", ":")) if old is not None else None
        change = Change(rv, "MODIFIED" if old is not None else "ADDED", skey, obj, old,
                        len(body) + len(old_body or ""))
        self._commit(
            change,
            ("INSERT OR REPLACE INTO objects (skey, namespace, name, rv, body) VALUES (?, ?, ?, ?, ?)",
             (skey, namespace, name, rv, body)),
            body, old_body,
        )
        self._objects[skey][(namespace, name)] = obj
        self.changes.publish(change)
        return change

    def remove(self, skey: str, obj: dict[str, Any]) -> Change:
        """Delete ``obj``; the DELETED event carries it with a new resourceVersion."""
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        rv = self.rv + 1
        final = copy.deepcopy(obj)
        final["metadata"]["resourceVersion"] = str(rv)
        body = json.dumps(final, separators=(",", ":"))
        old_body = json.dumps(obj, separators=(",", ":"))
        change = Change(rv, "DELETED", skey, final, obj, len(body) + len(old_body))
        self._commit(
            change,
            ("DELETE FROM objects WHERE skey = ? AND namespace = ? AND name = ?", (skey, namespace, name)),
            body, old_body,
        )
        self._objects[skey].pop((namespace, name), None)
        self.changes.publish(change)
        return change

    def _commit(self, change: Change, statement: tuple[str, tuple[Any, ...]], body: str, old: str | None) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.execute(*statement)
            self._db.execute(
                "INSERT INTO events (rv, type, skey, body, old) VALUES (?, ?, ?, ?, ?)",
                (change.rv, change.type, change.skey, body, old),
            )
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('rv', ?)", (str(change.rv),))
            if change.rv % 1000 == 0:
                self._compact(change.rv)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self.rv = change.rv

    def _compact(self, rv: int) -> None:
        """Drop the persisted changes the feed no longer keeps (by count, or by bytes)."""
        floor = max(rv - self.changes.size, self.changes.compacted_rv)
        if floor > int(self.get_meta("compacted_rv") or 0):
            self._db.execute("DELETE FROM events WHERE rv <= ?", (floor,))
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('compacted_rv', ?)", (str(floor),))
