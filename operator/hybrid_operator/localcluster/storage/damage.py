"""A damaged ``state.db``: say what is wrong and what to do, keep what can be read, never start empty by mistake.

The database can be damaged by a full disk, a crash of the machine, a bad
copy or a hand edit. Before this module the server then exited with a raw
``sqlite3`` traceback naming neither the file nor a way out, one undecodable
row kept it down for good, and a zero-length ``state.db`` was taken for a new
cluster (every object gone, without a word). Now:

* **Nothing readable at all** (a damaged header: ``file is not a database``),
  a file in use or that cannot be opened: :class:`StoreError`, a message naming
  the file, what is wrong and what to do; the command line prints it and exits 1.
* **A zero-length** ``state.db`` (or a write-ahead log without its database):
  :class:`StoreError`, unless the server was started with ``--reset-data``.
  A new ``state.db`` is created whole (schema written to a temporary file,
  then renamed), so the server never leaves an empty one behind itself.
* **Damaged pages** (SQLite's ``quick_check`` fails at start, or a read fails
  with ``database disk image is malformed``): :func:`salvage` copies every row
  it can still read into a new database, records the keys of the objects it
  could not read in its ``quarantine`` table, keeps the damaged files beside it
  (``state.db.damaged-<time>``, with their ``-wal`` and ``-shm``) and the
  server goes on with the copy. If not one object can be read, it refuses
  (:class:`StoreError`) rather than start empty.
* **Undecodable rows** (not UTF-8, not JSON, not an object, a name that does not
  match its key): the :class:`~.store.Store` moves each one, bytes unchanged,
  to the ``quarantine`` table, logs it with its key and reports it at start.

Rows quarantined can be read with ``sqlite3 state.db 'SELECT * FROM quarantine'``.
Their objects are gone from the cluster without a DELETED event, so the watch
history before that start is dropped: a client resuming from an older
resourceVersion gets 410 Expired and lists again.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hybrid_operator.localcluster import files

log = logging.getLogger(__name__)

#: the database's companions, moved with it
COMPANIONS = ("-wal", "-shm", "-journal")


def reset_hint(path: Path) -> str:
    """What every message proposes when nothing of the file can be used."""
    return (f"Restore it from a backup, or start a new, empty cluster with --reset-data (the old files are kept "
            f"beside it as {path.name}.reset-<time>).")


class StoreError(Exception):
    """The data directory cannot be used as it is; the message says why and what to do."""


@dataclass(frozen=True)
class Quarantined:
    """One row moved to the quarantine table: where it was, its key, and why."""

    source: str  # objects | events | meta
    key: str
    reason: str


def now_stamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")


def set_aside(path: Path, label: str) -> Path:
    """Rename ``path`` and its companions to ``<name>.<label>-<time>``; the new name of ``path``."""
    target = path.with_name(f"{path.name}.{label}-{now_stamp()}")
    for suffix in ("", *COMPANIONS):
        source = path.with_name(path.name + suffix)
        if source.exists():
            os.replace(source, target.with_name(target.name + suffix))
    return target


def refuse_missing_data(path: Path) -> None:
    """A ``state.db`` of zero bytes, or a write-ahead log without its database: data that is gone, never a new
    cluster."""
    wal = path.with_name(path.name + "-wal")
    if path.exists() and path.stat().st_size == 0:
        raise StoreError(f"{path} is empty (0 bytes): the cluster's data is gone (a full disk, a crash while it was "
                         "copied, or a truncation), and starting on it would serve an empty cluster. "
                         + reset_hint(path))
    if not path.exists() and wal.exists() and wal.stat().st_size > 0:
        raise StoreError(f"{path} is missing but its write-ahead log {wal.name} is there: the database was deleted "
                         f"or moved without it. Put {path.name} back. " + reset_hint(path))


def create(path: Path, schema: str) -> None:
    """A new database at ``path`` with ``schema``, written to a temporary sibling (mode 0600) and renamed."""
    temp = path.with_name(f".{path.name}.new")
    for suffix in ("", *COMPANIONS):
        temp.with_name(temp.name + suffix).unlink(missing_ok=True)
    files.create_private(temp)
    with files.private_umask():
        db = sqlite3.connect(str(temp), isolation_level=None)
        try:
            db.executescript(schema)
        finally:
            db.close()
    os.replace(temp, path)


def explain(path: Path, exc: sqlite3.Error) -> StoreError:
    """What an error of SQLite's means for this data directory."""
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_NOTADB":
        return StoreError(f"{path} is not a readable SQLite database ({exc}): its header is damaged, so nothing in it "
                          "can be read. " + reset_hint(path))
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):
        return StoreError(f"{path} is in use ({exc}): is another `hybrid-operator cluster` serving this data "
                          "directory? Stop it, or choose another --data-dir.")
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_IOERR", "SQLITE_FULL")):
        return StoreError(f"cannot use {path} ({exc}): check that it and its directory belong to this user, are "
                          "writable, and that the disk has space.")
    return StoreError(f"cannot use {path} ({exc}{', ' + name if name else ''}). " + reset_hint(path))


def is_damage(exc: sqlite3.Error) -> bool:
    """An error that says pages of the file are damaged (salvage may help)."""
    return getattr(exc, "sqlite_errorname", "") == "SQLITE_CORRUPT" or "malformed" in str(exc)


def problems(db: sqlite3.Connection) -> list[str]:
    """What SQLite's ``quick_check`` finds wrong with the file (empty: nothing). Linear in the file's size, and
    fast: well under a millisecond for the half megabyte of a cluster with 50 objects."""
    try:
        found = [str(row[0]) for row in db.execute("PRAGMA quick_check(20)")]
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    return [] if found == ["ok"] else found


def salvage(path: Path, schema: str, found: Iterable[str]) -> list[Quarantined]:
    """Copy what can be read from the damaged database at ``path`` into a new one that takes its place (the
    damaged files are kept as ``<name>.damaged-<time>``); the objects that could not be read, whose keys are
    now in the new database's quarantine table."""
    listed = "; ".join(found)[:500]
    log.error("state.db is damaged: salvaging what can be read", extra={"path": str(path), "problems": listed})
    temp = path.with_name(f".{path.name}.salvage")
    for suffix in ("", *COMPANIONS):
        temp.with_name(temp.name + suffix).unlink(missing_ok=True)
    create(temp, schema)
    try:
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        target = sqlite3.connect(str(temp), isolation_level=None)
        try:
            copied, lost = _copy(source, target, listed)
        finally:
            source.close()
            target.close()
    except sqlite3.Error as exc:
        temp.unlink(missing_ok=True)
        raise StoreError(f"{path} is damaged ({listed}) and could not be salvaged ({exc}). "
                         + reset_hint(path)) from exc
    if copied == 0:
        temp.unlink(missing_ok=True)
        raise StoreError(f"{path} is damaged ({listed}) and not one object could be read from it. "
                         + reset_hint(path))
    kept = set_aside(path, "damaged")
    os.replace(temp, path)
    log.error("state.db salvaged: the damaged files are kept beside it",
              extra={"path": str(path), "objects": copied, "unreadable": len(lost), "damaged_copy": str(kept)})
    for row in lost:
        log.warning("damaged row moved to quarantine",
                    extra={"path": str(path), "table": row.source, "key": row.key, "reason": row.reason})
    return lost


def _copy(source: sqlite3.Connection, target: sqlite3.Connection, listed: str) -> tuple[int, list[Quarantined]]:
    """Every readable meta and object row, and the keys of unreadable objects into quarantine (none of the watch
    history: see below). The number of objects copied, and those lost."""
    stamp = now_stamp()
    target.execute("BEGIN")
    for key in ("token", "rv", "compacted_rv"):
        try:
            row = source.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None:
            target.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, row[0]))
    keys = _object_keys(source)
    copied, top, lost = 0, 0, []
    for skey, namespace, name in sorted(keys):
        try:
            row = source.execute("SELECT rv, CAST(body AS BLOB) FROM objects "
                                 "WHERE skey = ? AND namespace = ? AND name = ?", (skey, namespace, name)).fetchone()
        except sqlite3.DatabaseError as exc:
            reason = f"unreadable in the damaged file: {exc}"
            target.execute("INSERT INTO quarantine (source, skey, namespace, name, reason, at) "
                           "VALUES ('objects', ?, ?, ?, ?, ?)", (skey, namespace, name, reason, stamp))
            lost.append(Quarantined("objects", f"{skey}/{namespace}/{name}", reason))
            continue
        if row is None:
            continue
        target.execute("INSERT OR REPLACE INTO objects (skey, namespace, name, rv, body) VALUES (?, ?, ?, ?, ?)",
                       (skey, namespace, name, row[0], _text(row[1])))
        copied += 1
        top = max(top, row[0] if isinstance(row[0], int) else 0)
    # the history cannot be trusted around damaged pages, and objects may be gone without an event:
    # none of it is kept, and every watch resuming from before gets 410 Expired
    try:
        rv = int(source.execute("SELECT value FROM meta WHERE key = 'rv'").fetchone()[0])
    except (sqlite3.DatabaseError, TypeError, ValueError):
        rv = 0
    with contextlib.suppress(sqlite3.DatabaseError, TypeError, ValueError):
        rv = max(rv, int(source.execute("SELECT max(rv) FROM events").fetchone()[0] or 0))
    floor = max(rv, top) + 1  # the state changed without events: a new resourceVersion, and no resume before it
    target.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('rv', ?)", (str(floor),))
    target.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('compacted_rv', ?)", (str(floor),))
    target.execute("COMMIT")
    log.warning("state.db salvage: the watch history is dropped", extra={"listed": listed[:200], "rv": floor})
    return copied, lost


def _text(body: bytes | None) -> str | bytes | None:
    """A body as text when it is UTF-8 (as the store writes it), else its bytes unchanged (the load quarantines it)."""
    try:
        return body.decode() if body is not None else None
    except UnicodeDecodeError:
        return body


def _object_keys(source: sqlite3.Connection) -> set[tuple[str, str, str]]:
    """The keys of the objects table, from its primary-key index (it lives on other pages than the rows) and
    from a scan of the table, each as far as it reads."""
    keys: set[tuple[str, str, str]] = set()
    for query in ("SELECT skey, namespace, name FROM objects INDEXED BY sqlite_autoindex_objects_1 "
                  "ORDER BY skey, namespace, name",
                  "SELECT skey, namespace, name FROM objects NOT INDEXED"):
        try:
            for skey, namespace, name in source.execute(query):
                if isinstance(skey, str) and isinstance(namespace, str) and isinstance(name, str):
                    keys.add((skey, namespace, name))
        except sqlite3.Error:
            continue
    return keys
