"""Unit tests of runners.events: ansible-runner job events -> RunResult, without running anything."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.events import EventCollector, RunOutcome, result_from_events
from hybrid_operator.ansible.runs import FailedTask, RunResult

pytestmark = pytest.mark.unit

OK = RunOutcome("successful", rc=0)
FAILED = RunOutcome("failed", rc=2)


COUNT_KEYS = ("ok", "changed", "skipped", "failures", "dark", "rescued", "ignored", "processed")
CREATED = "2026-11-30T09:49:22.706463+00:00"


def stats(counter: int = 100, created: str = CREATED, **counts: Any) -> dict[str, Any]:
    data: dict[str, Any] = {key: {} for key in COUNT_KEYS}
    data.update(counts)
    return {"event": "playbook_on_stats", "counter": counter, "created": created, "event_data": data}


def failed(task: str, msg: str, counter: int, *, host: str = "localhost", ignore_errors: bool | None = None,
           **res: Any) -> dict[str, Any]:
    result = {"msg": msg, **res} if msg else dict(res)
    return {"event": "runner_on_failed", "counter": counter, "event_data": {
        "host": host, "task": task, "ignore_errors": ignore_errors, "task_action": "fail", "res": result}}


def requeue(period: Any, counter: int, action: str = "requeue_after", resolved: str = "") -> dict[str, Any]:
    return {"event": "runner_on_ok", "counter": counter, "event_data": {
        "host": "localhost", "task": "requeue", "task_action": action, "resolved_action": resolved or action,
        "res": {"period": period, "changed": False}}}


def verbose(text: str, counter: int) -> dict[str, Any]:
    return {"event": "verbose", "counter": counter, "stdout": text, "event_data": {}}


def test_counts_are_for_localhost_only() -> None:
    result = result_from_events([stats(
        ok={"localhost": 4, "other": 9}, changed={"localhost": 2}, skipped={"localhost": 1},
        ignored={"localhost": 1}, rescued={"other": 1})], OK)

    assert (result.ok, result.changed, result.skipped, result.failures, result.unreachable) == (4, 2, 1, 0, 0)
    assert (result.ignored, result.rescued) == (1, 0)
    assert result.succeeded
    assert result.error is None


@pytest.mark.parametrize(("created", "expected"), [
    ("2026-11-30T09:49:22.706463+00:00", "2026-11-30T09:49:22Z"),
    ("2026-11-30T09:49:22.706463", "2026-11-30T09:49:22Z"),
    ("2026-11-30T11:49:22+02:00", "2026-11-30T09:49:22Z"),
    ("not a time", None),
])
def test_completion_is_rfc3339_utc(created: str, expected: str | None) -> None:
    assert result_from_events([stats(created=created)], OK).completion == expected


@pytest.mark.parametrize(("events", "expected"), [
    pytest.param([failed("a", "boom", 1), stats(failures={"localhost": 1})], [FailedTask("a", "boom")],
                 id="plain failure"),
    pytest.param([failed("a", "ignored", 1, ignore_errors=True), stats(ignored={"localhost": 1})], [],
                 id="ignored"),
    pytest.param([failed("a", "rescued", 1), stats(rescued={"localhost": 1})], [], id="rescued"),
    pytest.param([failed("a", "rescued", 1), failed("b", "real", 2),
                  stats(failures={"localhost": 1}, rescued={"localhost": 1})], [FailedTask("b", "real")],
                 id="rescued then real"),
    pytest.param([failed("a", "real", 1), failed("always", "also", 2), stats(failures={"localhost": 2})],
                 [FailedTask("a", "real"), FailedTask("always", "also")], id="failure in always section"),
    pytest.param([failed("a", "one", 1), failed("b", "two", 2, ignore_errors=True)],
                 [FailedTask("a", "one")], id="no stats: every unignored failure"),
    pytest.param([failed("x", "other host", 1, host="db"), stats(failures={"db": 1})],
                 [FailedTask("x", "other host")], id="other host"),
    pytest.param([failed("a", "", 1, stderr="no such file"), stats(failures={"localhost": 1})],
                 [FailedTask("a", "no such file")], id="stderr when no msg"),
    pytest.param([failed("a", "", 1), stats(failures={"localhost": 1})],
                 [FailedTask("a", "the task failed without a message")], id="no message at all"),
])
def test_failed_tasks(events: list[dict[str, Any]], expected: list[FailedTask]) -> None:
    assert list(result_from_events(events, FAILED).failed_tasks) == expected


def test_failed_run_is_not_an_error_and_joins_messages() -> None:
    result = result_from_events(
        [failed("a", "first", 1), failed("b", "second", 2), stats(failures={"localhost": 2})], FAILED)

    assert result.error is None
    assert not result.succeeded
    assert result.failures == 2
    assert result.failure_message == "first\nsecond"


def test_events_are_read_in_counter_order() -> None:
    events = [stats(counter=9, failures={"localhost": 1}), failed("late", "real", 5),
              failed("early", "rescued", 2)]
    assert list(result_from_events(events, FAILED).failed_tasks) == [FailedTask("late", "real")]


@pytest.mark.parametrize(("events", "expected"), [
    ([requeue("30s", 1)], timedelta(seconds=30)),
    ([requeue("1h2m", 1, action="operator_sdk.util.requeue_after")], timedelta(hours=1, minutes=2)),
    ([requeue("5s", 1, action="requeue_after", resolved="operator_sdk.util.requeue_after")],
     timedelta(seconds=5)),
    ([requeue("10s", 1), requeue("20s", 2)], timedelta(seconds=10)),
    ([requeue("soon", 1), requeue("20s", 2)], timedelta(seconds=20)),
    ([requeue(30, 1)], None),
    ([requeue("30s", 1, action="debug")], None),
    ([], None),
])
def test_requeue_after(events: list[dict[str, Any]], expected: timedelta | None) -> None:
    assert result_from_events([*events, stats()], OK).requeue_after == expected


@pytest.mark.parametrize(("event_data", "expected"), [
    ({"artifact_data": {"status": {"replicas": 3}}}, {"status": {"replicas": 3}}),
    ({"artifact_data": {}}, {}),
    ({}, {}),
    ({"artifact_data": "junk"}, {}),
])
def test_set_stats_data(event_data: dict[str, Any], expected: dict[str, Any]) -> None:
    event = stats()
    event["event_data"].update(event_data)
    assert result_from_events([event], OK).stats_data == expected


SYNTAX_ERROR_OUTPUT = [
    verbose("\x1b[0;31mERROR! conflicting action statements: debug, bogus\x1b[0m", 1),
    verbose("\x1b[0;31m\x1b[0m", 2),
    verbose("\x1b[0;31mThe error appears to be in '/p/site.yml': line 4, column 7\x1b[0m", 3),
]


@pytest.mark.parametrize(("events", "outcome", "fragments"), [
    pytest.param(SYNTAX_ERROR_OUTPUT, RunOutcome("failed", rc=4),
                 ["exit code 4", "no playbook_on_stats event", "ERROR! conflicting action statements",
                  "line 4, column 7"], id="syntax error"),
    pytest.param([verbose("[WARNING]: noise", 1), verbose("[ERROR]: Task failed: bad", 2)],
                 RunOutcome("failed", rc=4), ["[ERROR]: Task failed: bad"], id="2.19 error format"),
    pytest.param([verbose("The command was not found or was not executable: ansible-playbook.", 1)],
                 RunOutcome("failed", rc=127), ["exit code 127", "ansible-playbook."],
                 id="missing executable"),
    pytest.param([], RunOutcome("failed", rc=-9), ["it printed nothing"], id="killed"),
    pytest.param([], RunOutcome("canceled", rc=254), ["cancelled"], id="cancelled"),
    pytest.param([], RunOutcome("timeout", rc=254, timeout=30), ["time limit of 30 s"], id="timeout"),
    pytest.param([], RunOutcome("error", detail="ConfigurationError: no playbook"),
                 ["could not start", "no playbook"], id="could not start"),
    pytest.param([stats(), verbose("ERROR! something odd", 1)], RunOutcome("failed", rc=3),
                 ["exit code 3", "something odd"], id="stats but bad exit code"),
])
def test_errors(events: list[dict[str, Any]], outcome: RunOutcome, fragments: list[str]) -> None:
    result = result_from_events(events, outcome)

    assert result.error is not None
    for fragment in fragments:
        assert fragment in result.error
    assert "\x1b[" not in result.error
    assert not result.succeeded
    assert result.failure_message == result.error


def test_cancelled_flag_and_outcome_fields_are_carried() -> None:
    outcome = RunOutcome("canceled", rc=254, duration=1.5, ident="abc", artifact_dir=Path("/x/abc"))
    result = result_from_events([], outcome)

    assert result.cancelled
    assert (result.duration, result.artifact_ident, result.artifact_dir) == (1.5, "abc", Path("/x/abc"))


def test_long_output_is_truncated() -> None:
    events = [verbose("ERROR! " + "x" * 5000, 1)]
    error = result_from_events(events, RunOutcome("failed", rc=4)).error
    assert error is not None
    assert len(error) < 2300
    assert error.endswith("...")


@pytest.mark.parametrize(("result", "succeeded"), [
    (RunResult(completion="2026-01-01T00:00:00Z"), True),
    (RunResult(), False),
    (RunResult(completion="2026-01-01T00:00:00Z", unreachable=1), False),
    (RunResult(completion="2026-01-01T00:00:00Z", failed_tasks=(FailedTask("a", "b"),)), False),
    (RunResult(completion="2026-01-01T00:00:00Z", cancelled=True), False),
])
def test_succeeded(result: RunResult, succeeded: bool) -> None:
    assert result.succeeded is succeeded


def test_collector_keeps_only_what_results_need_in_order() -> None:
    collector = EventCollector()
    noise = {"event": "runner_on_ok", "counter": 1, "event_data": {"task_action": "debug", "res": {}}}
    kept = [stats(counter=5), failed("a", "boom", 3), requeue("1s", 2), verbose("ERROR! x", 4)]

    assert all(collector(event) for event in [noise, *kept])
    assert [event["counter"] for event in collector.events()] == [2, 3, 4, 5]


def test_collector_bounds_verbose_output() -> None:
    collector = EventCollector()
    for counter in range(2000):
        collector(verbose(f"line {counter}", counter))

    events = collector.events()
    assert 0 < len(events) <= 500
    assert events[-1]["stdout"] == "line 1999"
