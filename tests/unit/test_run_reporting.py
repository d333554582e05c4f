"""What the operator says about a run (issue 14, gaps 2, 5 and 12).

* ``ANSIBLE_DEBUG_LOGS=True`` puts each run's whole output into the operator's log (the SDK prints it);
* a play that matched no host gives a Warning Event (the run still succeeds, as in the SDK);
* a task that failed when its ``until`` loop ran out of retries says so, with its last message.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator import logs
from hybrid_operator.ansible.events import RunOutcome, result_from_events
from hybrid_operator.ansible.reconciler import REASON_NO_HOSTS, AnsibleReconciler
from hybrid_operator.cli.commands import _settings, build_parser
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind
from hybrid_operator.config.settings import Settings
from support.fakes import FakeCluster, FakeRunner, succeeded

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")


def make(cluster: FakeCluster, runner: FakeRunner, tmp_path: Path, **settings: Any) -> AnsibleReconciler:
    watch = AnsibleWatch(gvk=GVK, playbook=Path("/nowhere/playbook.yml"))
    return AnsibleReconciler(watch, cluster, runner, Settings(artifacts_dir=tmp_path / "runner", **settings),
                             asyncio.Semaphore(1), tmp_path / "kubeconfig", {})


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add_kind(GVK.group, GVK.version, GVK.kind, "memcacheds")
    cluster.create({"apiVersion": GVK.api_version, "kind": GVK.kind,
                    "metadata": {"name": "m", "namespace": "ns"}, "spec": {}})
    return cluster


def with_output(tmp_path: Path, text: str) -> Any:
    run = tmp_path / "run"
    run.mkdir()
    (run / "stdout").write_text(text)
    return replace(succeeded(ok=1), artifact_dir=run)


OUTPUT = "PLAY [localhost]\n" + "".join(f"TASK [step {i}] ok\n" for i in range(5000)) + "PLAY RECAP\n"


@pytest.mark.parametrize("value", ["True", "TRUE", "true", "1", "t"])
def test_ansible_debug_logs_is_read_as_a_go_boolean(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANSIBLE_DEBUG_LOGS", value)
    assert _settings(build_parser().parse_args(["run"]), None).ansible_debug_logs


@pytest.mark.parametrize("value", ["", "false", "FALSE", "0", "yes"])
def test_ansible_debug_logs_off(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANSIBLE_DEBUG_LOGS", value)
    assert not _settings(build_parser().parse_args(["run"]), None).ansible_debug_logs


async def test_debug_logs_put_the_whole_output_of_each_run_in_the_log(
        cluster: FakeCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    runner = FakeRunner(with_output(tmp_path, OUTPUT))
    with caplog.at_level(logging.INFO):
        await make(cluster, runner, tmp_path, ansible_debug_logs=True, ansible_verbosity=0).reconcile("ns", "m")
    [record] = [r for r in caplog.records if r.getMessage() == "run output"]
    assert record.__dict__["output"] == OUTPUT  # all of it, not only its end
    text = logs.TextFormatter().format(record)
    assert "\n----- output -----\nPLAY [localhost]\nTASK [step 0] ok\n" in text  # printed as lines


async def test_without_debug_logs_no_output_at_low_verbosity(
        cluster: FakeCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    runner = FakeRunner(with_output(tmp_path, OUTPUT))
    with caplog.at_level(logging.INFO):
        await make(cluster, runner, tmp_path, ansible_verbosity=0).reconcile("ns", "m")
    assert not [r for r in caplog.records if r.getMessage() == "run output"]


async def test_a_play_that_matched_no_host_is_a_warning_event(cluster: FakeCluster, tmp_path: Path) -> None:
    runner = FakeRunner(replace(succeeded(ok=1), unmatched_plays=("'setup' (hosts: test)",)))
    outcome = await make(cluster, runner, tmp_path).reconcile("ns", "m")
    assert not outcome.failed
    assert REASON_NO_HOSTS in cluster.reasons()
    [event] = [e for e in cluster.events if e.reason == REASON_NO_HOSTS]
    assert event.type == "Warning" and "'setup' (hosts: test)" in event.message
    stored = cluster.stored(GVK.kind, "ns", "m")
    assert stored is not None
    successful = [c for c in stored["status"]["conditions"] if c["type"] == "Successful"]
    assert successful[0]["status"] == "True"  # as in the SDK


def failed_event(res: dict[str, Any], counter: int = 1) -> dict[str, Any]:
    return {"event": "runner_on_failed", "counter": counter,
            "event_data": {"task": "wait for the database", "host": "localhost", "res": res}}


STATS = {"event": "playbook_on_stats", "counter": 9, "created": "2026-01-01T00:00:00",
         "event_data": {"failures": {"localhost": 1}, "ok": {"localhost": 2}}}


def test_an_until_loop_that_ran_out_of_retries_says_so() -> None:
    events = [failed_event({"attempts": 60, "failed": True, "changed": False, "resources": []}), STATS]
    result = result_from_events(events, RunOutcome("failed", rc=2))
    assert result.failure_message == "its until condition was still false after 60 attempts"


def test_an_until_loop_shows_the_last_attempts_message() -> None:
    events = [failed_event({"attempts": 3, "failed": True, "msg": "Status code was 503 and not [200]"}), STATS]
    result = result_from_events(events, RunOutcome("failed", rc=2))
    assert result.failure_message == ("its until condition was still false after 3 attempts; "
                                      "the last attempt said: Status code was 503 and not [200]")


def test_a_failed_when_without_message_says_so() -> None:
    events = [failed_event({"failed": True, "failed_when_result": True, "changed": False}), STATS]
    result = result_from_events(events, RunOutcome("failed", rc=2))
    assert result.failure_message == "its failed_when condition was true"


def test_a_plain_message_is_unchanged() -> None:
    events = [failed_event({"failed": True, "msg": "boom"}), STATS]
    assert result_from_events(events, RunOutcome("failed", rc=2)).failure_message == "boom"


def test_plays_that_matched_no_host_are_read_from_the_events() -> None:
    events = [{"event": "playbook_on_no_hosts_matched", "counter": 2,
               "event_data": {"play": "setup", "play_pattern": "test"}},
              {**STATS, "event_data": {"ok": {"localhost": 1}}}]
    result = result_from_events(events, RunOutcome("successful", rc=0))
    assert result.succeeded
    assert result.unmatched_plays == ("'setup' (hosts: test)",)
