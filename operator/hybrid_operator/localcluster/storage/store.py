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

A damaged database is handled by :mod:`.damage`: a clear :class:`~.damage.StoreError`
when nothing can be read (or the file is empty), a salvage of what can be
read when pages are damaged, and a ``quarantine`` table for rows that do
not decode (:attr:`Store.quarantined` lists those of this start).
"""

from __future__ import annotations

import builtins
import collections
import copy
import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hybrid_operator.localcluster import errors, files
from hybrid_operator.localcluster.storage import damage
from hybrid_operator.localcluster.storage.changes import Change, ChangeFeed

log = logging.getLogger(__name__)

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
CREATE TABLE IF NOT EXISTS quarantine (
    id INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL,
    skey BLOB, namespace BLOB, name BLOB, rv BLOB, body BLOB, old BLOB,
    reason TEXT NOT NULL, at TEXT NOT NULL
);
"""



# etcd's default --max-request-bytes: kube-apiserver cannot store a larger object.
MAX_OBJECT_BYTES = 1536 * 1024
#: WAL pages after which a commit checkpoints by itself: only a backstop, the server checkpoints
#: in the background (:meth:`Store.checkpoint`) so that no request waits for it
BACKSTOP_CHECKPOINT_PAGES = 16384


class Store:
    """Objects by (storage key, namespace, name), persisted in SQLite."""

    def __init__(self, path: Path | None, history: int = 20000, history_bytes: int | None = 64 * 1024 * 1024,
                 reset: bool = False) -> None:
        """Open (or create) the store at ``path`` (None: in memory); ``reset`` sets an existing one aside first
        (``--reset-data``). Raises :class:`~.damage.StoreError` when the file cannot be used."""
        self._path = path
        #: rows of this start that could not be read or decoded, now in the quarantine table
        self.quarantined: builtins.list[damage.Quarantined] = []
        if path is not None and reset and any(path.with_name(path.name + s).exists() for s in ("", "-wal")):
            kept = damage.set_aside(path, "reset")
            log.warning("state.db set aside: starting a new, empty cluster (--reset-data)",
                        extra={"path": str(path), "kept_as": str(kept)})
        self._db = self._open(path)
        self._checkpointer: sqlite3.Connection | None = None
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = collections.defaultdict(dict)
        self.changes = ChangeFeed(history, history_bytes)
        self.rv = 0
        self._load()

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        """The database, its file and SQLite's ``-wal``/``-shm`` companions all ``0600`` from their creation."""
        for companion in ("", "-wal", "-shm", "-journal"):
            files.tighten(path.with_name(path.name + companion), files.PRIVATE_FILE)
        with files.private_umask():  # SQLite creates -wal and -shm itself (with the database file's mode)
            db = sqlite3.connect(str(path), isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_CHECKPOINT_PAGES}")
                db.executescript(SCHEMA)
            except BaseException:
                db.close()
                raise
        return db

    def _open(self, path: Path | None) -> sqlite3.Connection:
        """Connect, after refusing a zero-length file, creating a new one whole, and salvaging a damaged one."""
        if path is None:
            db = sqlite3.connect(":memory:", isolation_level=None)
            db.executescript(SCHEMA)
            return db
        damage.refuse_missing_data(path)
        if not path.exists():
            damage.create(path, SCHEMA)
        try:
            db = self._connect(path)
            found = damage.problems(db)
            if not found:
                return db
            db.close()
        except sqlite3.Error as exc:
            if not damage.is_damage(exc):
                raise damage.explain(path, exc) from exc
            found = [str(exc)]
        self.quarantined.extend(damage.salvage(path, SCHEMA, found))
        try:
            return self._connect(path)
        except sqlite3.Error as exc:
            raise damage.explain(path, exc) from exc

    # -- loading -----------------------------------------------------------------

    def _load(self) -> None:
        try:
            self._load_rows()
        except sqlite3.Error as exc:
            if self._path is None or not damage.is_damage(exc):
                raise damage.explain(self._path or Path(":memory:"), exc) from exc
            self._db.close()
            lost = damage.salvage(self._path, SCHEMA, [str(exc)])
            self._objects.clear()
            self.quarantined[:] = lost
            try:
                self._db = self._connect(self._path)
                self._load_rows()
            except sqlite3.Error as again:
                raise damage.explain(self._path, again) from again

    def _load_rows(self) -> None:
        """Objects, the persisted history and the counters; every row that does not decode is quarantined."""
        moves: builtins.list[tuple[str, int, str, str]] = []  # table, rowid, key, reason
        top = 0
        for rowid, skey, namespace, name, rv, body in self._db.execute(
            "SELECT rowid, CAST(skey AS BLOB), CAST(namespace AS BLOB), CAST(name AS BLOB), rv, CAST(body AS BLOB) "
            "FROM objects"
        ):
            key = "/".join(_shown(part) for part in (skey, namespace, name))
            try:
                skey_text, namespace_text, name_text = _text(skey), _text(namespace), _text(name)
                obj = _stored_object(_text(body), namespace_text, name_text)
            except ValueError as exc:
                moves.append(("objects", rowid, key, str(exc)))
                continue
            self._objects[skey_text][(namespace_text, name_text)] = obj
            top = max(top, rv if isinstance(rv, int) else 0)
        changes: builtins.list[Change] = []
        for rv, kind, skey, body, old in self._db.execute(
            "SELECT rv, CAST(type AS BLOB), CAST(skey AS BLOB), CAST(body AS BLOB), CAST(old AS BLOB) "
            "FROM events ORDER BY rv"
        ):
            try:
                change = _stored_change(rv, kind, skey, body, old)
            except ValueError as exc:
                moves.append(("events", rv, f"change at resourceVersion {rv}", str(exc)))
                continue
            changes.append(change)
            top = max(top, rv)
        meta: dict[str, int] = {}
        for rowid, key_blob, value in self._db.execute(
            "SELECT rowid, CAST(key AS BLOB), CAST(value AS BLOB) FROM meta "
            "WHERE key IN ('rv', 'compacted_rv', 'token')"
        ):
            try:
                text = _text(value)
                if key_blob != b"token":
                    meta[_text(key_blob)] = int(text)
            except ValueError as exc:
                moves.append(("meta", rowid, _shown(key_blob), f"not a valid value: {exc}"))
        self.rv = max(meta.get("rv", 0), top)
        compacted = meta.get("compacted_rv", 0)
        if moves:
            compacted = self._quarantine(moves, compacted)
        self.changes.restore((change for change in changes if change.rv > compacted), compacted)

    def _quarantine(self, moves: builtins.list[tuple[str, int, str, str]], compacted: int) -> int:
        """Move the rows that did not decode to the quarantine table; the new floor of the watch history."""
        stamp = damage.now_stamp()
        statements = {
            "objects": ("INSERT INTO quarantine (source, skey, namespace, name, rv, body, reason, at) "
                        "SELECT 'objects', skey, namespace, name, rv, body, ?, ? FROM objects WHERE rowid = ?",
                        "DELETE FROM objects WHERE rowid = ?"),
            "events": ("INSERT INTO quarantine (source, skey, rv, body, old, reason, at) "
                       "SELECT 'events', skey, rv, body, old, ?, ? FROM events WHERE rv = ?",
                       "DELETE FROM events WHERE rv = ?"),
            "meta": ("INSERT INTO quarantine (source, name, body, reason, at) "
                     "SELECT 'meta', key, value, ?, ? FROM meta WHERE rowid = ?",
                     "DELETE FROM meta WHERE rowid = ?"),
        }
        # objects gone without a DELETED event (the state changed: a new resourceVersion), or a gap in the
        # history: no watch may resume from before this
        if any(table == "objects" for table, *_ in moves):
            self.rv += 1
            floor = self.rv
        else:
            floor = max((rowid for table, rowid, *_ in moves if table == "events"), default=compacted)
        compacted = max(compacted, floor)
        self._db.execute("BEGIN")
        try:
            for table, rowid, _, reason in moves:
                copy_row, delete_row = statements[table]
                self._db.execute(copy_row, (reason, stamp, rowid))
                self._db.execute(delete_row, (rowid,))
            self._db.execute("DELETE FROM events WHERE rv <= ?", (compacted,))
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('compacted_rv', ?)", (str(compacted),))
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('rv', ?)", (str(self.rv),))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        for table, _, key, reason in moves:
            self.quarantined.append(damage.Quarantined(table, key, reason))
            log.warning("damaged row moved to quarantine", extra={
                "path": str(self._path), "table": table, "key": key, "reason": reason})
        return compacted

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
        """Objects of one storage key in etcd's key order, ``<namespace>/<name>`` as text (shared, read-only).

        As text, not as (namespace, name) pairs: ``kep-diff-other/a`` comes before ``kep-diff/a`` in etcd
        (``-`` sorts before ``/``), and a continue token resumes after such a key."""
        objects = self._objects.get(skey, {})
        for key in sorted(objects, key=_key_order):
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


def _text(value: bytes | None) -> str:
    """A stored column as text: UTF-8, as written."""
    if value is None:
        raise ValueError("a column is empty (NULL)")
    try:
        return value.decode()
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _shown(value: bytes | None) -> str:
    """A stored key for a log line, whatever its bytes."""
    return "" if value is None else value.decode(errors="replace")[:253]


def _json_object(text: str) -> dict[str, Any]:
    try:
        decoded = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from exc
    if not isinstance(decoded, dict) or not isinstance(decoded.get("metadata"), dict):
        raise ValueError("not an object with metadata")
    return decoded


def _stored_object(body: str, namespace: str, name: str) -> dict[str, Any]:
    obj = _json_object(body)
    meta = obj["metadata"]
    if meta.get("name") != name or str(meta.get("namespace", "")) != namespace:
        raise ValueError(f"its metadata names {meta.get('namespace', '')}/{meta.get('name')}, not its key")
    return obj


def _stored_change(rv: int, kind: bytes | None, skey: bytes | None, body: bytes | None, old: bytes | None) -> Change:
    kind_text, body_text = _text(kind), _text(body)
    if kind_text not in ("ADDED", "MODIFIED", "DELETED"):
        raise ValueError(f"unknown change type {kind_text!r}")
    old_text = _text(old) if old is not None else None
    return Change(rv, kind_text, _text(skey), _json_object(body_text),
                  _json_object(old_text) if old_text else None, len(body_text) + len(old_text or ""))


def _key_order(key: tuple[str, str]) -> str:
    """etcd's order of ``/registry/<resource>/<namespace>/<name>`` keys."""
    return f"{key[0]}/{key[1]}"
