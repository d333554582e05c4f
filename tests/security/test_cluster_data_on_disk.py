"""Issue 28 item 8: the embedded cluster's ``state.db`` damaged on disk (docs/security.md, "The embedded
cluster: connections and data on disk").

A real server makes a database of 50 ConfigMaps and stops; each test damages a copy of it the way a
full disk, a crash or a bad copy would, and starts a real ``hybrid-operator cluster`` on it:

* garbage over the file's header: exit 1 with a message naming the file and ``--reset-data``, no
  traceback, the file left as it was (before: a raw ``sqlite3`` traceback);
* garbage over the page that holds one ConfigMap: the server salvages the rest, serves the 49 others,
  reports the lost one by its key, and keeps the damaged file beside the new one (before: a traceback);
* one row that is not JSON any more: that row is moved to the quarantine table, bytes unchanged, and
  logged with its key; the 49 others are served; watches resuming from before get 410 (before: the
  server could not start at all);
* a zero-length ``state.db``: refused unless ``--reset-data``, which keeps the old file beside the new
  one (before: a new, empty cluster, every object silently gone).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from support.cluster import Cluster, RawWatch, raw_request

pytestmark = [pytest.mark.security, pytest.mark.integration]

CMS = "/api/v1/namespaces/default/configmaps"
NAMES = [f"cm-{i}" for i in range(50)]
#: a ConfigMap this size fills a 4 KiB page of SQLite's on its own, so damaging its page damages only it
VALUE = "x" * 3000


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir holding 50 ConfigMaps, written by a real server that then stopped cleanly."""
    cluster = Cluster(tmp_path_factory.mktemp("template"))
    cluster.start()
    try:
        for name in NAMES:
            answer = raw_request(cluster, "POST", CMS, {"metadata": {"name": name}, "data": {"v": VALUE}})
            assert answer.status == 201, answer.body[:300]
        before = raw_request(cluster, "GET", CMS).json()["metadata"]["resourceVersion"]
        (cluster.workdir / "rv").write_text(before)
    finally:
        assert cluster.stop() == 0
    wal = cluster.data_dir / "state.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0, "the stopped server left a write-ahead log"
    return cluster.workdir


def copy_of(template: Path, workdir: Path, *extra_args: str) -> Cluster:
    cluster = Cluster(workdir, extra_args=extra_args)
    shutil.copytree(template / "data", cluster.data_dir)
    return cluster


def refused(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the server on the damaged data and expect it to exit by itself (fails if it serves instead)."""
    command = [sys.executable, "-m", "hybrid_operator.cli", "cluster", "--port", str(cluster.port),
               "--data-dir", str(cluster.data_dir), "--kubeconfig", str(cluster.kubeconfig), *args]
    try:
        result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=30,
                                cwd=cluster.workdir)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the server served the damaged data instead of refusing it:\n{exc.stdout!r}\n{exc.stderr!r}")
    assert result.returncode != 0, f"exit 0:\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


def served_names(cluster: Cluster) -> set[str]:
    answer = raw_request(cluster, "GET", CMS)
    assert answer.status == 200, answer.body[:300]
    return {item["metadata"]["name"] for item in answer.json()["items"]} & set(NAMES)


def table_leaf_pages(path: Path, table: str) -> list[int]:
    """The leaf pages of ``table``'s b-tree, walked from its root page (SQLite's file format, section 1.6)."""
    with sqlite3.connect(path) as db:
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?",
                          (table,)).fetchone()[0]
    db.close()
    data = path.read_bytes()
    page_size = int.from_bytes(data[16:18], "big") or 65536

    def walk(number: int) -> list[int]:
        start = (number - 1) * page_size
        header = start + (100 if number == 1 else 0)
        kind = data[header]
        if kind == 0x0D:  # a table leaf
            return [number]
        assert kind == 0x05, f"page {number} is not a table b-tree page ({kind:#x})"
        cells = int.from_bytes(data[header + 3:header + 5], "big")
        children = [int.from_bytes(data[start + pointer:start + pointer + 4], "big")
                    for pointer in (int.from_bytes(data[header + 12 + 2 * i:header + 14 + 2 * i], "big")
                                    for i in range(cells))]
        children.append(int.from_bytes(data[header + 8:header + 12], "big"))
        return [leaf for child in children for leaf in walk(child)]

    return walk(root)


def test_a_damaged_header_is_refused_naming_the_file_and_the_way_out(template: Path, tmp_path: Path) -> None:
    cluster = copy_of(template, tmp_path)
    database = cluster.data_dir / "state.db"
    with database.open("r+b") as handle:
        handle.write(b"\xde\xad" * 8)  # over "SQLite format 3\0"
    damaged = database.read_bytes()
    result = refused(cluster)
    assert str(database) in result.stderr and "--reset-data" in result.stderr, result.stderr
    assert database.read_bytes() == damaged, "the damaged file was changed"


def test_a_damaged_page_is_salvaged_and_every_other_object_served(template: Path, tmp_path: Path) -> None:
    cluster = copy_of(template, tmp_path)
    database = cluster.data_dir / "state.db"
    data = database.read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    holding = [page for page in table_leaf_pages(database, "objects")
               if b'"name":"cm-25"' in data[(page - 1) * page_size:page * page_size]]
    assert len(holding) == 1, holding
    with database.open("r+b") as handle:
        handle.seek((holding[0] - 1) * page_size)
        handle.write(b"\xff" * 64)  # the page's b-tree header and cell pointers
    cluster.start()
    try:
        assert served_names(cluster) == set(NAMES) - {"cm-25"}
        assert raw_request(cluster, "GET", f"{CMS}/cm-25").status == 404
    finally:
        cluster.stop()
    log = cluster.log_path.read_text()
    assert "damaged row moved to quarantine" in log and "default/cm-25" in log, log[-3000:]
    assert "damaged row(s)" in log and "Traceback" not in log, log[-3000:]
    assert list(cluster.data_dir.glob("state.db.damaged-*")), "the damaged file was not kept"
    with sqlite3.connect(database) as db:
        lost = db.execute("SELECT source, name FROM quarantine").fetchall()
    db.close()
    assert lost == [("objects", "cm-25")]


def test_one_bad_row_is_quarantined_and_the_rest_served(template: Path, tmp_path: Path) -> None:
    cluster = copy_of(template, tmp_path)
    database = cluster.data_dir / "state.db"
    truncated = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"na'
    with sqlite3.connect(database) as db:
        db.execute("UPDATE objects SET body = ? WHERE name = 'cm-7'", (truncated,))
    db.close()
    old_rv = (template / "rv").read_text()
    cluster.start()
    try:
        assert served_names(cluster) == set(NAMES) - {"cm-7"}
        assert raw_request(cluster, "GET", f"{CMS}/cm-7").status == 404
        with RawWatch(cluster, f"{CMS}?watch=true&resourceVersion={old_rv}") as watch:
            event = watch.next_event()
        assert event is not None and event["type"] == "ERROR" and event["object"]["code"] == 410, event
    finally:
        cluster.stop()
    log = cluster.log_path.read_text()
    assert "damaged row moved to quarantine" in log and "/configmaps/default/cm-7" in log, log[-3000:]
    with sqlite3.connect(database) as db:
        kept = db.execute("SELECT source, CAST(name AS TEXT), CAST(body AS TEXT) FROM quarantine").fetchall()
    db.close()
    assert kept == [("objects", "cm-7", truncated)], "the bad row was not kept as it was"


def test_a_zero_length_state_db_is_refused_unless_reset(template: Path, tmp_path: Path) -> None:
    cluster = copy_of(template, tmp_path)
    database = cluster.data_dir / "state.db"
    database.write_bytes(b"")
    result = refused(cluster)
    assert str(database) in result.stderr and "empty" in result.stderr and "--reset-data" in result.stderr
    assert database.stat().st_size == 0 and not list(cluster.data_dir.glob("state.db.*")), "the data dir changed"
    reset = Cluster(tmp_path, extra_args=("--reset-data",))
    reset.start()
    try:
        assert served_names(reset) == set()
        assert raw_request(reset, "GET", "/api/v1/namespaces/default").status == 200
    finally:
        reset.stop()
    kept = [path for path in cluster.data_dir.glob("state.db.reset-*") if not path.name.endswith(("-wal", "-shm"))]
    assert len(kept) == 1 and kept[0].stat().st_size == 0, kept
