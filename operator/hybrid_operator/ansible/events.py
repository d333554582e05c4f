"""From ansible-runner job events to a :class:`~hybrid_operator.runners.base.RunResult` (pure).

Every Ansible runner (the ansible-runner adapter, a later warm runner) receives the same job
events -- the dicts ansible-runner's ``awx_display`` callback emits -- so the reading of them lives
here, free of I/O, and is unit-tested on its own. What is read, as the Operator SDK reads it:

* counts from the last ``playbook_on_stats`` event, for one host (``localhost``); its ``created``
  time is the completion time, its ``event_data["artifact_data"]`` the ``set_stats`` data;
* the failed tasks: ``runner_on_failed`` events without ``ignore_errors`` (and
  ``runner_on_unreachable`` ones). Events do not say whether a ``rescue`` section caught a failure,
  but the stats count rescued failures apart; a failure that is not rescued ends the host's run
  (only ``always`` sections run after it), so the host's *last* ``failures`` failed events are the
  unrescued ones and any earlier failed event was rescued;
* ``requeue_after``: the first ``runner_on_ok`` of a ``requeue_after`` or
  ``operator_sdk.util.requeue_after`` task, whose result's ``period`` is a Go duration;
* for runs without stats (syntax error, missing executable, killed), the error text from the
  ``verbose`` events (Ansible's own output outside any task);
* the plays that matched no host (``playbook_on_no_hosts_matched``): the SDK counts such a run as a
  success, and so do we, but the reconciler says so (a Warning Event) instead of staying silent;
* for a task that failed after an ``until`` loop ran out of retries, a message saying so, with the
  last attempt's own message when it has one (Ansible gives none of its own).

Every event handler also calls :func:`strip_environment` before the event is kept or written: our
``awx_display`` callback (``callback_plugins/``) already leaves ``ansible_env`` out of task results,
and this makes sure the final ``job_events/*.json`` and the operator's memory never hold it either.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hybrid_operator.ansible.runs import FailedTask, RunResult
from hybrid_operator.config.values import DurationError, parse_duration

STATS_EVENT = "playbook_on_stats"
NO_HOSTS_EVENT = "playbook_on_no_hosts_matched"
REQUEUE_ACTIONS = frozenset({"requeue_after", "operator_sdk.util.requeue_after"})
_FATAL_EVENTS = {"runner_on_failed": "failures", "runner_on_unreachable": "dark"}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAX_ERROR_LINES = 12
_MAX_ERROR_CHARS = 2000
_MAX_VERBOSE_EVENTS = 500


@dataclass(frozen=True)
class RunOutcome:
    """How the run's process ended, as the runner saw it.

    ``status`` is ansible-runner's final status (``successful``, ``failed``, ``canceled``,
    ``timeout``) or ``error`` when the run could not start, ``detail`` then saying why.
    ``timeout`` is the limit in seconds the run had (for the message).
    """

    status: str
    rc: int | None = None
    duration: float = 0.0
    ident: str = ""
    artifact_dir: Path | None = None
    detail: str = ""
    timeout: float | None = None


#: the facts that hold the environment of the process that gathered them (the operator's, secrets included)
ENVIRONMENT_FACTS = ("ansible_env",)


def strip_environment(event: Mapping[str, Any]) -> None:
    """Remove the environment facts from a job event's task result (and its loop items), in place."""
    data = event.get("event_data")
    if isinstance(data, dict):
        _strip_result(data.get("res"))


def _strip_result(result: Any) -> None:
    if not isinstance(result, dict):
        return
    facts = result.get("ansible_facts")
    if isinstance(facts, dict):
        for name in ENVIRONMENT_FACTS:
            facts.pop(name, None)
    items = result.get("results")
    if isinstance(items, list):
        for item in items:
            _strip_result(item)


class EventCollector:
    """An ``event_handler`` keeping, in memory, only the events a result is built from.

    Verbose output is bounded to the last few hundred lines. Call it from one thread at a time
    (ansible-runner calls it from the run's thread); it returns True so artifacts keep every event.
    """

    def __init__(self) -> None:
        self._kept: list[Mapping[str, Any]] = []
        self._verbose: deque[Mapping[str, Any]] = deque(maxlen=_MAX_VERBOSE_EVENTS)

    def __call__(self, event: Mapping[str, Any]) -> bool:
        strip_environment(event)
        name = event.get("event")
        if name == "verbose":
            self._verbose.append(event)
        elif name in _FATAL_EVENTS or name in (STATS_EVENT, NO_HOSTS_EVENT) or _is_requeue(event):
            self._kept.append(event)
        return True

    def events(self) -> list[Mapping[str, Any]]:
        """The kept events in the order they happened."""
        return _ordered([*self._kept, *self._verbose])


def result_from_events(
    events: Iterable[Mapping[str, Any]], outcome: RunOutcome, *, host: str = "localhost"
) -> RunResult:
    """Build the result of a run from its job events and how its process ended."""
    ordered = _ordered(events)
    stats = _stats_event(ordered)
    stats_data = _data(stats) if stats is not None else None
    failed_tasks = _failed_tasks(ordered, stats_data)
    counts = {key: _count(stats_data, key, host) for key in
              ("ok", "changed", "skipped", "failures", "dark", "rescued", "ignored")}
    artifact_data = stats_data.get("artifact_data") if stats_data is not None else None
    return RunResult(
        ok=counts["ok"], changed=counts["changed"], skipped=counts["skipped"], failures=counts["failures"],
        unreachable=counts["dark"], rescued=counts["rescued"], ignored=counts["ignored"],
        completion=_rfc3339(stats.get("created")) if stats is not None else None,
        failed_tasks=tuple(failed_tasks),
        error=_error(outcome, ordered, has_stats=stats is not None,
                     fatal=bool(failed_tasks) or counts["failures"] > 0 or counts["dark"] > 0),
        cancelled=outcome.status == "canceled",
        requeue_after=_requeue_after(ordered),
        stats_data=copy.deepcopy(dict(artifact_data)) if isinstance(artifact_data, Mapping) else {},
        duration=outcome.duration, artifact_ident=outcome.ident, artifact_dir=outcome.artifact_dir,
        unmatched_plays=_unmatched_plays(ordered),
    )


def _unmatched_plays(events: list[Mapping[str, Any]]) -> tuple[str, ...]:
    """``<play name> (hosts: <pattern>)`` of each play that matched no host."""
    plays = []
    for event in events:
        if event.get("event") != NO_HOSTS_EVENT:
            continue
        data = _data(event)
        name, pattern = str(data.get("play") or ""), str(data.get("play_pattern") or "")
        plays.append(f"{name!r} (hosts: {pattern})" if name else f"hosts: {pattern}")
    return tuple(plays)


def _ordered(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    listed = list(events)
    return sorted(listed, key=lambda event: _int(event.get("counter"), default=0))


def _data(event: Mapping[str, Any]) -> Mapping[str, Any]:
    data = event.get("event_data")
    return data if isinstance(data, Mapping) else {}


def _int(value: Any, *, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _stats_event(events: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    found = [event for event in events if event.get("event") == STATS_EVENT]
    return found[-1] if found else None


def _count(stats_data: Mapping[str, Any] | None, key: str, host: str) -> int:
    per_host = stats_data.get(key) if stats_data is not None else None
    return _int(per_host.get(host), default=0) if isinstance(per_host, Mapping) else 0


def _failed_tasks(events: list[Mapping[str, Any]], stats_data: Mapping[str, Any] | None) -> list[FailedTask]:
    """Unignored failed events; with stats, only each host's last ``failures`` (+ ``dark``) of them."""
    candidates: list[tuple[str, str, FailedTask]] = []
    for event in events:
        name = str(event.get("event"))
        data = _data(event)
        if name not in _FATAL_EVENTS or data.get("ignore_errors"):
            continue
        task = str(data.get("task") or data.get("task_action") or "")
        host = str(data.get("host") or "")
        candidates.append((host, _FATAL_EVENTS[name], FailedTask(task, _message(data))))
    if stats_data is None:
        return [failed for _, _, failed in candidates]
    remaining = {(host, key): _count(stats_data, key, host) for host, key, _ in candidates}
    kept: list[FailedTask] = []
    for host, key, failed in reversed(candidates):
        if remaining[(host, key)] > 0:
            remaining[(host, key)] -= 1
            kept.append(failed)
    return kept[::-1]


def _message(data: Mapping[str, Any]) -> str:
    result = data.get("res")
    result = result if isinstance(result, Mapping) else {}
    own = _own_message(result)
    attempts = result.get("attempts")
    # Ansible adds ``attempts`` to the result of an ``until``/``retries`` task; a failed one ran out of them
    if isinstance(attempts, int) and not isinstance(attempts, bool) and attempts > 0:
        retried = f"its until condition was still false after {attempts} attempt{'s' if attempts != 1 else ''}"
        return f"{retried}; the last attempt said: {own}" if own else retried
    if own:
        return own
    if result.get("failed_when_result"):
        return "its failed_when condition was true"
    return "the task failed without a message"


def _own_message(result: Mapping[str, Any]) -> str:
    """What a task result says of itself: ``msg``, ``stderr`` or ``reason`` (first non-empty)."""
    for key in ("msg", "stderr", "reason"):
        value = result.get(key)
        if value:
            return value if isinstance(value, str) else str(value)
    return ""


def _is_requeue(event: Mapping[str, Any]) -> bool:
    if event.get("event") != "runner_on_ok":
        return False
    data = _data(event)
    return bool({data.get("task_action"), data.get("resolved_action")} & REQUEUE_ACTIONS)


def _requeue_after(events: list[Mapping[str, Any]]) -> timedelta | None:
    for event in events:
        if not _is_requeue(event):
            continue
        result = _data(event).get("res")
        period = result.get("period") if isinstance(result, Mapping) else None
        if isinstance(period, str):
            try:
                return parse_duration(period)
            except DurationError:
                continue
    return None


def _rfc3339(created: Any) -> str | None:
    if not isinstance(created, str):
        return None
    try:
        moment = datetime.fromisoformat(created)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _error(
    outcome: RunOutcome, events: list[Mapping[str, Any]], *, has_stats: bool, fatal: bool
) -> str | None:
    if outcome.status == "canceled":
        return "the run was cancelled before it finished"
    if outcome.status == "timeout":
        limit = f" of {outcome.timeout:g} s" if outcome.timeout is not None else ""
        return f"the run exceeded its time limit{limit} and was stopped"
    if outcome.status == "error":
        return f"the run could not start: {outcome.detail or 'unknown reason'}"
    if not has_stats:
        return (f"ansible-playbook ended (exit code {outcome.rc}) without reporting a result "
                f"(no playbook_on_stats event): {_output_excerpt(events)}")
    if outcome.rc not in (0, None) and not fatal:
        return f"ansible-playbook ended (exit code {outcome.rc}) with an error: {_output_excerpt(events)}"
    return None


def _output_excerpt(events: list[Mapping[str, Any]]) -> str:
    """Ansible's error lines (from the first ``ERROR``), else its last lines of output."""
    lines = [
        line.strip()
        for event in events if event.get("event") == "verbose"
        for line in _ANSI.sub("", str(event.get("stdout") or "")).replace("\r", "").split("\n")
        if line.strip()
    ]
    if not lines:
        return "it printed nothing"
    start = next((index for index, line in enumerate(lines) if "ERROR" in line), None)
    chosen = lines[start : start + _MAX_ERROR_LINES] if start is not None else lines[-_MAX_ERROR_LINES:]
    text = "\n".join(chosen)
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."
