"""The status a custom resource shows after each reconcile phase, computed purely, then written once.

Why this module exists: users and tools (Molecule tests waiting for ``Successful=True``, dashboards,
``kubectl wait``) read the Operator SDK's condition types, reasons and messages, so their exact
strings and the shapes of ``ansibleResult`` and ``deployedRelease`` are a compatibility contract
(``compat-ansible.md`` §3, ``compat-helm.md`` §3). Keeping that logic free of I/O lets the reconciler
build the whole new ``status`` for a phase, turn it into one JSON merge patch with
:func:`status_patch` and write nothing at all when nothing changed.

Every phase function takes the CR's current ``status`` (a JSON mapping, possibly ``None``), never
mutates it, and returns a new dict in which:

* top-level keys this module does not own (``k8s_status``/``set_stats`` data of the playbook, for
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
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

# --- condition statuses -------------------------------------------------------------------------
TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"

# --- Ansible (ansible-operator-plugins internal/ansible/controller/status) -----------------------
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

ANSIBLE_RESULT_HOST = "localhost"

# --- Helm (operator-sdk internal/helm/internal/types) --------------------------------------------
INITIALIZED = "Initialized"
DEPLOYED = "Deployed"
RELEASE_FAILED = "ReleaseFailed"
IRRECONCILABLE = "Irreconcilable"

REASON_INSTALL_SUCCESSFUL = "InstallSuccessful"
REASON_UPGRADE_SUCCESSFUL = "UpgradeSuccessful"
REASON_UNINSTALL_SUCCESSFUL = "UninstallSuccessful"
REASON_INSTALL_ERROR = "InstallError"
REASON_UPGRADE_ERROR = "UpgradeError"
REASON_RECONCILE_ERROR = "ReconcileError"
REASON_UNINSTALL_ERROR = "UninstallError"

DEPLOYED_REASONS = frozenset({REASON_INSTALL_SUCCESSFUL, REASON_UPGRADE_SUCCESSFUL})
RELEASE_FAILED_REASONS = frozenset({REASON_INSTALL_ERROR, REASON_UPGRADE_ERROR, REASON_UNINSTALL_ERROR})

# --- top-level status keys ----------------------------------------------------------------------
CONDITIONS = "conditions"
OBSERVED_GENERATION = "observedGeneration"
DEPLOYED_RELEASE = "deployedRelease"

REDACTED = "***"

Status = dict[str, Any]


def format_time(moment: datetime) -> str:
    """Render a ``lastTransitionTime`` like Kubernetes does: RFC 3339, UTC, whole seconds.

    A naive datetime is taken to be UTC already.
    """
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each secret value in ``text`` with ``***``.

    Empty secrets are ignored; longer secrets are replaced first so that a secret containing
    another one is hidden whole.
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


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


def ansible_result_from_stats(event_data: Mapping[str, Any], created: str) -> AnsibleResult:
    """Build the ``ansibleResult`` of a ``playbook_on_stats`` event (its ``event_data`` and ``created``).

    Only host ``localhost`` is counted, as in the SDK; ``created`` is normalised to the SDK's
    ``completion`` format (no zone, fraction without trailing zeros, at most 8 digits).
    """

    def count(key: str) -> int:
        per_host = event_data.get(key)
        if not isinstance(per_host, Mapping):
            return 0
        value = per_host.get(ANSIBLE_RESULT_HOST, 0)
        return value if isinstance(value, int) else 0

    return AnsibleResult(
        ok=count("ok"),
        changed=count("changed"),
        skipped=count("skipped"),
        failures=count("failures"),
        completion=format_completion(created),
    )


def format_completion(created: str) -> str:
    """Normalise an ansible-runner ``created`` timestamp to the SDK's ``completion`` text."""
    text = created.strip().removesuffix("Z")
    moment, dot, fraction = text.partition(".")
    if not dot:
        return moment
    fraction = fraction[:8].rstrip("0")
    return f"{moment}.{fraction}" if fraction else moment


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
    ansible_result: AnsibleResult | None = None
    sparse: bool = False

    def to_dict(self, last_transition_time: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.reason or not self.sparse:
            out["reason"] = self.reason
        if self.message or not self.sparse:
            out["message"] = self.message
        if self.ansible_result is not None:
            out["ansibleResult"] = self.ansible_result.to_dict()
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
            result[index] = new.to_dict(_transition_time(entry, new.status, now))
            return result
    result.append(new.to_dict(format_time(now)))
    return result


def remove_condition(conditions: Sequence[Any], condition_type: str) -> list[Any]:
    """Return ``conditions`` without any condition of ``condition_type``."""
    return [
        copy.deepcopy(entry)
        for entry in conditions
        if not (isinstance(entry, dict) and entry.get("type") == condition_type)
    ]


def _transition_time(old: Mapping[str, Any], new_status: str, now: datetime) -> str:
    kept = old.get("lastTransitionTime")
    if old.get("status") == new_status and isinstance(kept, str) and kept:
        return kept
    return format_time(now)


def _flip_if_present(conditions: list[Any], condition_type: str, new_status: str, now: datetime) -> list[Any]:
    """Set only the status of an existing condition (the SDK's "copy and change status"), if any."""
    result = [copy.deepcopy(entry) for entry in conditions]
    for entry in result:
        if isinstance(entry, dict) and entry.get("type") == condition_type:
            entry["lastTransitionTime"] = _transition_time(entry, new_status, now)
            entry["status"] = new_status
            return result
    return result


# --- status documents ---------------------------------------------------------------------------


def _copy_status(status: Mapping[str, Any] | None) -> Status:
    return copy.deepcopy(dict(status)) if isinstance(status, Mapping) else {}


def _conditions_of(status: Mapping[str, Any]) -> list[Any]:
    conditions = status.get(CONDITIONS)
    return list(conditions) if isinstance(conditions, list) else []


def _with_generation(status: Status, generation: int | None) -> Status:
    if generation is not None:
        status[OBSERVED_GENERATION] = generation
    return status


# --- Ansible phases -----------------------------------------------------------------------------


def running(status: Mapping[str, Any] | None, now: datetime) -> Status:
    """A run starts: ``Running=True/Running``; ``Successful`` (if present) becomes False."""
    new = _copy_status(status)
    conditions = _flip_if_present(_conditions_of(new), SUCCESSFUL, FALSE, now)
    conditions = set_condition(conditions, Condition(RUNNING, TRUE, REASON_RUNNING, MESSAGE_RUNNING), now)
    new[CONDITIONS] = conditions
    return new


def succeeded(
    status: Mapping[str, Any] | None, result: AnsibleResult, now: datetime, generation: int | None = None
) -> Status:
    """A run ended without failed tasks: Running (+ ``ansibleResult``) and Successful True, Failure False."""
    new = _copy_status(status)
    conditions = _conditions_of(new)
    conditions = set_condition(
        conditions, Condition(RUNNING, TRUE, REASON_SUCCESSFUL, MESSAGE_AWAITING, ansible_result=result), now
    )
    successful = Condition(SUCCESSFUL, TRUE, REASON_SUCCESSFUL, MESSAGE_SUCCEEDED)
    conditions = set_condition(conditions, successful, now)
    conditions = set_condition(conditions, Condition(FAILURE, FALSE), now)
    new[CONDITIONS] = conditions
    return _with_generation(new, generation)


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
    new = _copy_status(status)
    conditions = _flip_if_present(_conditions_of(new), RUNNING, FALSE, now)
    conditions = set_condition(
        conditions,
        Condition(FAILURE, TRUE, REASON_FAILED, redact(text, secrets), ansible_result=result),
        now,
    )
    conditions = set_condition(conditions, Condition(SUCCESSFUL, FALSE), now)
    new[CONDITIONS] = conditions
    return _with_generation(new, generation)


def errored(
    status: Mapping[str, Any] | None, error_text: str, now: datetime, *, secrets: Iterable[str] = ()
) -> Status:
    """The run could not happen (bad annotation, runner or kubeconfig error): Failure True/Failed.

    ``Running`` and ``Successful`` become False if present; no ``ansibleResult``.
    """
    new = _copy_status(status)
    conditions = _flip_if_present(_conditions_of(new), RUNNING, FALSE, now)
    conditions = _flip_if_present(conditions, SUCCESSFUL, FALSE, now)
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
    new = _copy_status(status)
    for key, value in stats_status.items():
        if key == CONDITIONS and isinstance(value, list):
            new[CONDITIONS] = _merge_conditions(_conditions_of(new), value, now)
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
                _transition_time(old, str(new_entry.get("status")), now) if old else format_time(now)
            )
        if old is None:
            result.append(new_entry)
        else:
            result[result.index(old)] = new_entry
    return result


# --- Helm phases --------------------------------------------------------------------------------


def _helm(condition_type: str, status: str, reason: str = "", message: str = "") -> Condition:
    return Condition(condition_type, status, reason, message, sparse=True)


def initialized(status: Mapping[str, Any] | None, now: datetime) -> Status:
    """Reconciliation of a live CR began: ``Initialized=True``."""
    new = _copy_status(status)
    new[CONDITIONS] = set_condition(_conditions_of(new), _helm(INITIALIZED, TRUE), now)
    return new


def deployed_release(release_name: str, manifest: str, *, store_digest: bool = False) -> dict[str, str]:
    """The ``deployedRelease`` value: the full manifest (SDK), or its ``sha256:`` digest only.

    The digest keeps large manifests out of the CR (the SDK's copy counts against etcd's object
    size limit), at the price of the SDK's ``uninstall-wait`` cleanup, which reads the manifest.
    """
    if store_digest:
        digest = hashlib.sha256(manifest.encode("utf-8")).hexdigest()
        return {"name": release_name, "manifestDigest": f"sha256:{digest}"}
    return {"name": release_name, "manifest": manifest}


def deployed(
    status: Mapping[str, Any] | None,
    release_name: str,
    manifest: str,
    notes: str,
    reason: str,
    now: datetime,
    generation: int | None = None,
    *,
    store_digest: bool = False,
    secrets: Iterable[str] = (),
) -> Status:
    """Install, upgrade or drift repair succeeded: ``Deployed=True/<reason>`` with NOTES.txt as message.

    ``ReleaseFailed`` and ``Irreconcilable`` are removed and ``deployedRelease`` is set.
    """
    if reason not in DEPLOYED_REASONS:
        raise ValueError(f"deployed reason must be one of {sorted(DEPLOYED_REASONS)}, not {reason!r}")
    new = initialized(status, now)
    conditions = remove_condition(_conditions_of(new), RELEASE_FAILED)
    conditions = remove_condition(conditions, IRRECONCILABLE)
    conditions = set_condition(conditions, _helm(DEPLOYED, TRUE, reason, redact(notes, secrets)), now)
    new[CONDITIONS] = conditions
    new[DEPLOYED_RELEASE] = deployed_release(release_name, manifest, store_digest=store_digest)
    return _with_generation(new, generation)


def release_failed(
    status: Mapping[str, Any] | None,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None = None,
    *,
    secrets: Iterable[str] = (),
) -> Status:
    """A Helm action failed: ``ReleaseFailed=True/<reason>`` with the error as message.

    For an install or upgrade error the release state was read successfully first, so
    ``Initialized`` is set and ``Irreconcilable`` removed; an uninstall error touches nothing else.
    """
    if reason not in RELEASE_FAILED_REASONS:
        allowed = sorted(RELEASE_FAILED_REASONS)
        raise ValueError(f"release failure reason must be one of {allowed}, not {reason!r}")
    if reason == REASON_UNINSTALL_ERROR:
        new = _copy_status(status)
        conditions = _conditions_of(new)
    else:
        new = initialized(status, now)
        conditions = remove_condition(_conditions_of(new), IRRECONCILABLE)
    conditions = set_condition(conditions, _helm(RELEASE_FAILED, TRUE, reason, redact(message, secrets)), now)
    new[CONDITIONS] = conditions
    return _with_generation(new, generation)


def irreconcilable(
    status: Mapping[str, Any] | None,
    message: str,
    now: datetime,
    generation: int | None = None,
    *,
    clear_release_failed: bool = False,
    secrets: Iterable[str] = (),
) -> Status:
    """The release state could not be read or repaired: ``Irreconcilable=True/ReconcileError``.

    Pass ``clear_release_failed=True`` when the error came from drift repair: the SDK drops a
    stale ``ReleaseFailed`` before repairing, since no release change is being attempted.
    """
    new = initialized(status, now)
    conditions = _conditions_of(new)
    if clear_release_failed:
        conditions = remove_condition(conditions, RELEASE_FAILED)
    conditions = set_condition(
        conditions, _helm(IRRECONCILABLE, TRUE, REASON_RECONCILE_ERROR, redact(message, secrets)), now
    )
    new[CONDITIONS] = conditions
    return _with_generation(new, generation)


def uninstalled(
    status: Mapping[str, Any] | None, now: datetime, *, keep_deployed_release: bool = False
) -> Status:
    """The release was uninstalled: ``Deployed=False/UninstallSuccessful``, ``ReleaseFailed`` removed.

    ``deployedRelease`` is removed unless ``keep_deployed_release`` (the ``uninstall-wait`` flow,
    which still needs the manifest to wait for its objects).
    """
    new = _copy_status(status)
    conditions = remove_condition(_conditions_of(new), RELEASE_FAILED)
    conditions = set_condition(conditions, _helm(DEPLOYED, FALSE, REASON_UNINSTALL_SUCCESSFUL), now)
    new[CONDITIONS] = conditions
    if not keep_deployed_release:
        new.pop(DEPLOYED_RELEASE, None)
    return new


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
