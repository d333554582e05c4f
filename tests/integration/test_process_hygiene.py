"""Issue 13 items 2, 5, 6 and 7 with real processes and a real embedded cluster.

* helm's parent-death signal: a child started with it dies when its parent is killed with
  SIGKILL (the helm left racing the next operator is what item 2 is about);
* the startup sweep kills processes carrying its scope's marker, and only those;
* the client raises :class:`errors.Unreachable` when nothing answers (not urllib3's errors);
* a repeated Event is counted on one Event object; the cluster deletes Events after ``--event-ttl``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hybrid_operator import errors, processes
from hybrid_operator.kube.client import ClusterClient
from support.cluster import Cluster, free_port

pytestmark = pytest.mark.integration


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


PARENT = """
import subprocess, sys, time
from hybrid_operator import processes
child = subprocess.Popen(["sleep", "300"], start_new_session=True, preexec_fn=processes.parent_death_signal())
print(child.pid, flush=True)
time.sleep(300)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux only")
def test_a_child_with_the_parent_death_signal_dies_with_a_killed_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        parent.kill()
        parent.wait(timeout=10)
        assert wait_dead(child), "the child outlived its parent's kill -9"
    finally:
        parent.kill()
        parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux only")
def test_the_sweep_kills_what_carries_its_scope_and_nothing_else(tmp_path: Path) -> None:
    scope, other = processes.scope_of(tmp_path / "a"), processes.scope_of(tmp_path / "b")
    mine = subprocess.Popen(["sleep", "300"], env={**os.environ, **processes.marker(scope)}, start_new_session=True)
    theirs = subprocess.Popen(["sleep", "300"], env={**os.environ, **processes.marker(other)},
                              start_new_session=True)
    try:
        assert processes.leftovers(scope) == [mine.pid]
        assert processes.kill_leftovers(scope) == [mine.pid]
        mine.wait(timeout=10)
        assert mine.returncode == -signal.SIGKILL
        assert theirs.poll() is None
    finally:
        for process in (mine, theirs):
            process.kill()
            process.wait(timeout=10)


def test_no_answer_is_unreachable_and_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{free_port()}",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    client = ClusterClient(kubeconfig)
    for _ in range(3):
        with pytest.raises(errors.Unreachable):
            client.request("GET", "/api/v1/namespaces", timeout=5)
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == ["API server unreachable"]


def test_a_repeated_event_is_one_object_with_a_count_and_events_expire(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, extra_args=("--event-ttl", "3s"))
    cluster.start()
    try:
        client = ClusterClient(cluster.kubeconfig)
        owner = client.request("POST", "/api/v1/namespaces/default/configmaps",
                               {"metadata": {"name": "owner"}, "data": {}})
        for _ in range(5):
            client.post_event(owner, "Normal", "ReconcileSucceeded", "run succeeded: ok=3 changed=0")
        client.post_event(owner, "Warning", "ReconcileFailed", "a task failed")
        listed = client.request("GET", "/api/v1/namespaces/default/events")["items"]
        assert sorted((e["reason"], e["count"]) for e in listed) == [("ReconcileFailed", 1), ("ReconcileSucceeded", 5)]
        deadline = time.monotonic() + 60
        while client.request("GET", "/api/v1/namespaces/default/events")["items"]:
            assert time.monotonic() < deadline, "the Events outlived the TTL"
            time.sleep(0.5)
        client.post_event(owner, "Normal", "ReconcileSucceeded", "run succeeded: ok=3 changed=0")
        again = client.request("GET", "/api/v1/namespaces/default/events")["items"]
        assert [(e["reason"], e["count"]) for e in again] == [("ReconcileSucceeded", 1)], \
            "an expired Event is made anew"
    finally:
        cluster.stop()
