"""Status conditions and the one write of a reconcile: shared by the Ansible and Helm sides.

Why this module exists: users and tools (Molecule tests waiting for ``Successful=True``, dashboards,
``kubectl wait``) read the Operator SDK's condition types, reasons and messages, so their exact
strings are a compatibility contract (``compat-ansible.md`` §3, ``compat-helm.md`` §3). The Ansible
and Helm phase functions (:mod:`hybrid_operator.ansible.status`, :mod:`hybrid_operator.helm.status`)
build the whole new ``status`` purely on top of these helpers; :func:`status_patch` turns it into
one JSON merge patch and nothing is written at all when nothing changed.

Every phase function takes the CR's current ``status`` (a JSON mapping, possibly ``None``), never
mutates it, and returns a new dict in which:

* top-level keys the phase does not own (``k8s_status``/``set_stats`` data of the playbook, for
  instance) are kept as they are;
* conditions of other types (custom ones) are kept, in their order;
* a condition's ``lastTransitionTime`` changes only when its ``status`` flips (or it is new);
* every message that reaches a condition went through :func:`redact` with the caller's secrets.

Deliberate differences from the SDK: a replaced condition keeps its position in the list (the SDK's
Ansible side moves it to the end); ``observedGeneration`` is recorded when the caller passes a
generation; a flipped condition always gets a fresh ``lastTransitionTime``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from hybrid_operator import clock

# --- condition statuses -------------------------------------------------------------------------
TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"

# --- top-level status keys ----------------------------------------------------------------------
CONDITIONS = "conditions"
OBSERVED_GENERATION = "observedGeneration"

#: what a secret value is replaced with, in condition messages, Events, logs and artifacts
REDACTED = "***"

Status = dict[str, Any]

def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each secret value in ``text`` with :data:`REDACTED`.

    Empty secrets are ignored; longer secrets are replaced first so that a secret containing
    another one is hidden whole.
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


@dataclasses.dataclass(frozen=True)
class Condition:
    """One status condition, before its ``lastTransitionTime`` is decided by :func:`set_condition`.

    ``sparse`` selects the Helm shape, which leaves out an empty ``reason``/``message``; the Ansible
    shape always carries both keys.
    """

    type: str
    status: str
    reason: str = ""
    message: str = ""
    #: further keys of the condition, after ``message`` (the Ansible side's ``ansibleResult``)
    extra: Mapping[str, Any] | None = None
    sparse: bool = False

    def to_dict(self, last_transition_time: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.reason or not self.sparse:
            out["reason"] = self.reason
        if self.message or not self.sparse:
            out["message"] = self.message
        if self.extra:
            out.update(copy.deepcopy(dict(self.extra)))
        out["lastTransitionTime"] = last_transition_time
        return out


# --- condition lists ----------------------------------------------------------------------------


def get_condition(conditions: Sequence[Any], condition_type: str) -> dict[str, Any] | None:
    """The first condition of ``condition_type`` (entries that are not objects are skipped)."""
    for entry in conditions:
        if isinstance(entry, dict) and entry.get("type") == condition_type:
            return entry
    return None


def set_condition(conditions: Sequence[Any], new: Condition, now: datetime) -> list[Any]:
    """Return ``conditions`` with ``new`` in place of the condition of the same type (or appended).

    ``lastTransitionTime`` is kept from the old condition when its status does not change;
    otherwise it becomes ``now``. Other entries, and the order, are left untouched.
    """
    result = [copy.deepcopy(entry) for entry in conditions]
    for index, entry in enumerate(result):
        if isinstance(entry, dict) and entry.get("type") == new.type:
            result[index] = new.to_dict(transition_time(entry, new.status, now))
            return result
    result.append(new.to_dict(clock.rfc3339(now)))
    return result


def remove_condition(conditions: Sequence[Any], condition_type: str) -> list[Any]:
    """Return ``conditions`` without any condition of ``condition_type``."""
    return [
        copy.deepcopy(entry)
        for entry in conditions
        if not (isinstance(entry, dict) and entry.get("type") == condition_type)
    ]


def transition_time(old: Mapping[str, Any], new_status: str, now: datetime) -> str:
    kept = old.get("lastTransitionTime")
    if old.get("status") == new_status and isinstance(kept, str) and kept:
        return kept
    return clock.rfc3339(now)


def flip_if_present(conditions: list[Any], condition_type: str, new_status: str, now: datetime) -> list[Any]:
    """Set only the status of an existing condition (the SDK's "copy and change status"), if any."""
    result = [copy.deepcopy(entry) for entry in conditions]
    for entry in result:
        if isinstance(entry, dict) and entry.get("type") == condition_type:
            entry["lastTransitionTime"] = transition_time(entry, new_status, now)
            entry["status"] = new_status
            return result
    return result


# --- status documents ---------------------------------------------------------------------------


def copy_status(status: Mapping[str, Any] | None) -> Status:
    return copy.deepcopy(dict(status)) if isinstance(status, Mapping) else {}


def conditions_of(status: Mapping[str, Any]) -> list[Any]:
    conditions = status.get(CONDITIONS)
    return list(conditions) if isinstance(conditions, list) else []


def with_generation(status: Status, generation: int | None) -> Status:
    if generation is not None:
        status[OBSERVED_GENERATION] = generation
    return status


# --- the write ----------------------------------------------------------------------------------


def status_patch(
    old_status: Mapping[str, Any] | None, new_status: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The JSON merge patch body (RFC 7386) for ``/status`` that turns ``old_status`` into ``new_status``.

    Keys missing from ``new_status`` become ``null``; lists are replaced whole. Returns ``None``
    when there is nothing to change, so a no-op reconcile writes nothing.
    """
    old = dict(old_status) if isinstance(old_status, Mapping) else {}
    diff = _diff(old, new_status)
    return {"status": diff} if diff else None


def _diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for key in old:
        if key not in new or new[key] is None:
            patch[key] = None
    for key, value in new.items():
        if value is None:
            continue
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = _diff(before, value)
            if nested:
                patch[key] = nested
        elif key not in old or before != value or type(before) is not type(value):
            patch[key] = copy.deepcopy(value)
    return patch
