"""The Ansible side's status: ``Running``/``Successful``/``Failure`` and ``ansibleResult``, as the SDK writes them.

Pure phase functions on top of :mod:`hybrid_operator.controller.conditions`: the reconciler computes
the whole new status of a phase with one of them and writes it with one merge patch. The playbook's
own ``set_stats`` status is merged first (:func:`merge_playbook_status`), so the operator's
conditions win.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from hybrid_operator import clock
from hybrid_operator.controller.conditions import (
    CONDITIONS,
    FALSE,
    TRUE,
    Condition,
    Status,
    conditions_of,
    copy_status,
    flip_if_present,
    get_condition,
    redact,
    set_condition,
    transition_time,
    with_generation,
)

# --- ansible-operator-plugins internal/ansible/controller/status ---------------------------------
RUNNING = "Running"
SUCCESSFUL = "Successful"
FAILURE = "Failure"

REASON_RUNNING = "Running"
REASON_SUCCESSFUL = "Successful"
REASON_FAILED = "Failed"

MESSAGE_RUNNING = "Running reconciliation"
MESSAGE_AWAITING = "Awaiting next reconciliation"
MESSAGE_SUCCEEDED = "Last reconciliation succeeded"
MESSAGE_UNKNOWN_FAILURE = "unknown playbook failure"


@dataclasses.dataclass(frozen=True)
class AnsibleResult:
    """Counts of the ``playbook_on_stats`` event for host ``localhost``, and when it was emitted."""

    ok: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    completion: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "changed": self.changed,
            "skipped": self.skipped,
            "failures": self.failures,
            "completion": self.completion,
        }

    def condition_keys(self) -> dict[str, Any]:
        """What the result adds to a condition: its ``ansibleResult`` key."""
        return {"ansibleResult": self.to_dict()}


def format_completion(created: str) -> str:
    """Normalise an ansible-runner ``created`` timestamp to the SDK's ``completion`` text."""
    text = created.strip().removesuffix("Z")
    moment, dot, fraction = text.partition(".")
    if not dot:
        return moment
    fraction = fraction[:8].rstrip("0")
    return f"{moment}.{fraction}" if fraction else moment



def running(status: Mapping[str, Any] | None, now: datetime) -> Status:
    """A run starts: ``Running=True/Running``; ``Successful`` (if present) becomes False."""
    new = copy_status(status)
    conditions = flip_if_present(conditions_of(new), SUCCESSFUL, FALSE, now)
    conditions = set_condition(conditions, Condition(RUNNING, TRUE, REASON_RUNNING, MESSAGE_RUNNING), now)
    new[CONDITIONS] = conditions
    return new


def succeeded(
    status: Mapping[str, Any] | None, result: AnsibleResult, now: datetime, generation: int | None = None
) -> Status:
    """A run ended without failed tasks: Running (+ ``ansibleResult``) and Successful True, Failure False."""
    new = copy_status(status)
    conditions = conditions_of(new)
    conditions = set_condition(
        conditions, Condition(RUNNING, TRUE, REASON_SUCCESSFUL, MESSAGE_AWAITING, extra=result.condition_keys()), now
    )
    successful = Condition(SUCCESSFUL, TRUE, REASON_SUCCESSFUL, MESSAGE_SUCCEEDED)
    conditions = set_condition(conditions, successful, now)
    conditions = set_condition(conditions, Condition(FAILURE, FALSE), now)
    new[CONDITIONS] = conditions
    return with_generation(new, generation)


def failed(
    status: Mapping[str, Any] | None,
    result: AnsibleResult,
    messages: Sequence[str],
    now: datetime,
    generation: int | None = None,
    *,
    secrets: Iterable[str] = (),
) -> Status:
    """A run ended with failed tasks: Failure True/Failed with their messages (one per line).

    ``Running`` (if present) becomes False and ``Successful`` becomes False with empty reason and
    message, as in the SDK.
    """
    text = "\n".join(messages) if messages else MESSAGE_UNKNOWN_FAILURE
    new = copy_status(status)
    conditions = flip_if_present(conditions_of(new), RUNNING, FALSE, now)
    conditions = set_condition(
        conditions,
        Condition(FAILURE, TRUE, REASON_FAILED, redact(text, secrets), extra=result.condition_keys()),
        now,
    )
    conditions = set_condition(conditions, Condition(SUCCESSFUL, FALSE), now)
    new[CONDITIONS] = conditions
    return with_generation(new, generation)


def errored(
    status: Mapping[str, Any] | None, error_text: str, now: datetime, *, secrets: Iterable[str] = ()
) -> Status:
    """The run could not happen (bad annotation, runner or kubeconfig error): Failure True/Failed.

    ``Running`` and ``Successful`` become False if present; no ``ansibleResult``.
    """
    new = copy_status(status)
    conditions = flip_if_present(conditions_of(new), RUNNING, FALSE, now)
    conditions = flip_if_present(conditions, SUCCESSFUL, FALSE, now)
    failure = Condition(FAILURE, TRUE, REASON_FAILED, redact(error_text, secrets))
    conditions = set_condition(conditions, failure, now)
    new[CONDITIONS] = conditions
    return new


def merge_playbook_status(
    status: Mapping[str, Any] | None, stats_status: Mapping[str, Any], now: datetime
) -> Status:
    """Merge the ``status`` map a playbook published with ``set_stats`` into ``status``.

    ``stats_status`` is the value under the ``status`` key of the set_stats data. Its keys are
    merged with JSON merge patch rules (maps merge recursively, ``null`` removes); its
    ``conditions`` are merged by type with the usual ``lastTransitionTime`` rule, unless the
    playbook gave one. Call this before the phase function, so the operator's own conditions win.
    """
    new = copy_status(status)
    for key, value in stats_status.items():
        if key == CONDITIONS and isinstance(value, list):
            new[CONDITIONS] = _merge_conditions(conditions_of(new), value, now)
        elif value is None:
            new.pop(key, None)
        else:
            new[key] = _merge_value(new.get(key), value)
    return new


def _merge_value(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge_value(merged.get(key), value)
    return copy.deepcopy(merged)


def _merge_conditions(conditions: list[Any], incoming: Sequence[Any], now: datetime) -> list[Any]:
    result = [copy.deepcopy(entry) for entry in conditions]
    for entry in incoming:
        if not (isinstance(entry, Mapping) and isinstance(entry.get("type"), str)):
            continue
        new_entry = copy.deepcopy(dict(entry))
        old = get_condition(result, new_entry["type"])
        if not new_entry.get("lastTransitionTime"):
            new_entry["lastTransitionTime"] = (
                transition_time(old, str(new_entry.get("status")), now) if old else clock.rfc3339(now)
            )
        if old is None:
            result.append(new_entry)
        else:
            result[result.index(old)] = new_entry
    return result
