"""Unit tests for the status conditions (controller.conditions, ansible.status, helm.status).

SDK condition shapes per phase, transition times, merge patches.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from hybrid_operator import clock
from hybrid_operator.ansible import status as ansible_status
from hybrid_operator.controller import conditions
from hybrid_operator.helm import status as helm_status

pytestmark = pytest.mark.unit

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)


def t(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def ts(minutes: int) -> str:
    return clock.rfc3339(t(minutes))


R1 = ansible_status.AnsibleResult(ok=3, changed=1, skipped=0, failures=0, completion="2024-05-01T10:01:00.5")
R2 = ansible_status.AnsibleResult(ok=1, changed=0, skipped=2, failures=1, completion="2024-05-01T10:03:00.25")
R3 = ansible_status.AnsibleResult(ok=4, changed=0, skipped=0, failures=0, completion="2024-05-01T10:05:00")


def acond(
    ctype: str, cstatus: str, reason: str, message: str, ltt: int, result: ansible_status.AnsibleResult | None = None
) -> dict[str, Any]:
    """An Ansible-shaped condition: reason and message always present."""
    out: dict[str, Any] = {"type": ctype, "status": cstatus, "reason": reason, "message": message}
    if result is not None:
        out["ansibleResult"] = result.to_dict()
    out["lastTransitionTime"] = ts(ltt)
    return out


def hcond(ctype: str, cstatus: str, ltt: int, reason: str = "", message: str = "") -> dict[str, Any]:
    """A Helm-shaped condition: empty reason/message left out."""
    out: dict[str, Any] = {"type": ctype, "status": cstatus}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    out["lastTransitionTime"] = ts(ltt)
    return out


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """An independent RFC 7386 implementation, to check that status_patch really turns old into new."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


# --- small helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC), "2024-05-01T10:00:00Z"),
        (datetime(2024, 5, 1, 10, 0, 0, 999999, tzinfo=UTC), "2024-05-01T10:00:00Z"),
        (datetime(2024, 5, 1, 12, 30, 5, tzinfo=timezone(timedelta(hours=2))), "2024-05-01T10:30:05Z"),
        (datetime(2024, 5, 1, 10, 0, 7), "2024-05-01T10:00:07Z"),
    ],
)
def test_format_time(moment: datetime, expected: str) -> None:
    assert clock.rfc3339(moment) == expected


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        ("password is hunter2", ["hunter2"], "password is ***"),
        ("hunter2 and hunter2", ["hunter2"], "*** and ***"),
        ("a=s3cret b=t0ken", ["s3cret", "t0ken"], "a=*** b=***"),
        ("nothing here", ["hunter2"], "nothing here"),
        ("keep me", [], "keep me"),
        ("keep me", [""], "keep me"),
        ("token abcdef", ["abc", "abcdef"], "token ***"),
        ("token abcdef", ["abcdef", "abc"], "token ***"),
        ("", ["x"], ""),
    ],
)
def test_redact(text: str, secrets: list[str], expected: str) -> None:
    assert conditions.redact(text, secrets) == expected


def test_redact_accepts_any_iterable() -> None:
    assert conditions.redact("a b c", (s for s in ["b"])) == "a *** c"


@pytest.mark.parametrize(
    ("created", "expected"),
    [
        ("2024-05-01T10:00:00.123456", "2024-05-01T10:00:00.123456"),
        ("2024-05-01T10:00:00.120000", "2024-05-01T10:00:00.12"),
        ("2024-05-01T10:00:00.000000", "2024-05-01T10:00:00"),
        ("2024-05-01T10:00:00", "2024-05-01T10:00:00"),
        ("2024-05-01T10:00:00.123456789", "2024-05-01T10:00:00.12345678"),
        ("2024-05-01T10:00:00.5Z", "2024-05-01T10:00:00.5"),
    ],
)
def test_format_completion(created: str, expected: str) -> None:
    assert ansible_status.format_completion(created) == expected


def test_ansible_result_shape() -> None:
    assert ansible_status.AnsibleResult(1, 2, 3, 4, "c").to_dict() == {
        "ok": 1, "changed": 2, "skipped": 3, "failures": 4, "completion": "c"
    }


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (
            conditions.Condition("Failure", "False"),
            {"type": "Failure", "status": "False", "reason": "", "message": "", "lastTransitionTime": "T"},
        ),
        (
            conditions.Condition("Running", "True", "Successful", "m", extra=R1.condition_keys()),
            {"type": "Running", "status": "True", "reason": "Successful", "message": "m",
             "ansibleResult": R1.to_dict(), "lastTransitionTime": "T"},
        ),
        (
            conditions.Condition("Initialized", "True", sparse=True),
            {"type": "Initialized", "status": "True", "lastTransitionTime": "T"},
        ),
        (
            conditions.Condition("Deployed", "True", "InstallSuccessful", "notes", sparse=True),
            {"type": "Deployed", "status": "True", "reason": "InstallSuccessful", "message": "notes",
             "lastTransitionTime": "T"},
        ),
    ],
)
def test_condition_to_dict(condition: conditions.Condition, expected: dict[str, Any]) -> None:
    assert condition.to_dict("T") == expected


# --- set_condition / remove_condition -----------------------------------------------------------

CUSTOM = {"type": "Ready", "status": "True", "reason": "Custom", "lastTransitionTime": "2020-01-01T00:00:00Z"}


@pytest.mark.parametrize(
    ("before", "new", "expected"),
    [
        pytest.param(
            [], conditions.Condition("Running", "True", "Running", "m"),
            [acond("Running", "True", "Running", "m", 5)],
            id="new-condition-gets-now",
        ),
        pytest.param(
            [acond("Running", "True", "Running", "old", 0)],
            conditions.Condition("Running", "True", "Successful", "new"),
            [acond("Running", "True", "Successful", "new", 0)],
            id="same-status-keeps-time-updates-rest",
        ),
        pytest.param(
            [acond("Running", "True", "Running", "old", 0)],
            conditions.Condition("Running", "False", "Running", "old"),
            [acond("Running", "False", "Running", "old", 5)],
            id="flip-gets-now",
        ),
        pytest.param(
            [{"type": "Running", "status": "True"}],
            conditions.Condition("Running", "True", "Running", "m"),
            [acond("Running", "True", "Running", "m", 5)],
            id="missing-time-gets-now",
        ),
        pytest.param(
            [CUSTOM, acond("Running", "True", "Running", "m", 0), "junk"],
            conditions.Condition("Running", "False", "Running", "m"),
            [CUSTOM, acond("Running", "False", "Running", "m", 5), "junk"],
            id="others-and-order-kept",
        ),
        pytest.param(
            [CUSTOM, "junk"],
            conditions.Condition("Failure", "True", "Failed", "x"),
            [CUSTOM, "junk", acond("Failure", "True", "Failed", "x", 5)],
            id="appended-after-others",
        ),
    ],
)
def test_set_condition(before: list[Any], new: conditions.Condition, expected: list[Any]) -> None:
    frozen = copy.deepcopy(before)
    assert conditions.set_condition(before, new, t(5)) == expected
    assert before == frozen


def test_remove_and_get_condition() -> None:
    listed = [CUSTOM, acond("Running", "True", "Running", "m", 0), "junk"]
    assert conditions.remove_condition(listed, "Running") == [CUSTOM, "junk"]
    assert conditions.remove_condition(listed, "Absent") == listed
    assert conditions.get_condition(listed, "Ready") == CUSTOM
    assert conditions.get_condition(listed, "Absent") is None
    assert len(listed) == 3


# --- Ansible phases -----------------------------------------------------------------------------

RUN_MSG, AWAIT_MSG, OK_MSG = "Running reconciliation", "Awaiting next reconciliation", "Last reconciliation succeeded"

Step = tuple[Callable[[Any], dict[str, Any]], list[dict[str, Any]], dict[str, Any]]

# Each step: the phase applied to the previous step's status, the conditions expected, and the other
# top-level keys expected.
ANSIBLE_LIFECYCLE: list[Step] = [
    (
        lambda s: ansible_status.running(s, t(0)),
        [acond("Running", "True", "Running", RUN_MSG, 0)],
        {},
    ),
    (
        lambda s: ansible_status.succeeded(s, R1, t(1), 1),
        [
            acond("Running", "True", "Successful", AWAIT_MSG, 0, R1),
            acond("Successful", "True", "Successful", OK_MSG, 1),
            acond("Failure", "False", "", "", 1),
        ],
        {"observedGeneration": 1},
    ),
    (
        lambda s: ansible_status.running(s, t(2)),
        [
            acond("Running", "True", "Running", RUN_MSG, 0),
            acond("Successful", "False", "Successful", OK_MSG, 2),
            acond("Failure", "False", "", "", 1),
        ],
        {"observedGeneration": 1},
    ),
    (
        lambda s: ansible_status.failed(s, R2, ["boom", "bang"], t(3), 2),
        [
            acond("Running", "False", "Running", RUN_MSG, 3),
            acond("Successful", "False", "", "", 2),
            acond("Failure", "True", "Failed", "boom\nbang", 3, R2),
        ],
        {"observedGeneration": 2},
    ),
    (
        lambda s: ansible_status.running(s, t(4)),
        [
            acond("Running", "True", "Running", RUN_MSG, 4),
            acond("Successful", "False", "", "", 2),
            acond("Failure", "True", "Failed", "boom\nbang", 3, R2),
        ],
        {"observedGeneration": 2},
    ),
    (
        lambda s: ansible_status.succeeded(s, R3, t(5), 3),
        [
            acond("Running", "True", "Successful", AWAIT_MSG, 4, R3),
            acond("Successful", "True", "Successful", OK_MSG, 5),
            acond("Failure", "False", "", "", 5),
        ],
        {"observedGeneration": 3},
    ),
    (
        lambda s: ansible_status.errored(s, "bad annotation", t(6)),
        [
            acond("Running", "False", "Successful", AWAIT_MSG, 6, R3),
            acond("Successful", "False", "Successful", OK_MSG, 6),
            acond("Failure", "True", "Failed", "bad annotation", 6),
        ],
        {"observedGeneration": 3},
    ),
]


def test_ansible_lifecycle() -> None:
    current: dict[str, Any] | None = None
    for index, (phase, expected, others) in enumerate(ANSIBLE_LIFECYCLE):
        new = phase(current)
        assert new["conditions"] == expected, f"step {index}"
        assert {k: v for k, v in new.items() if k != "conditions"} == others, f"step {index}"
        current = new


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        pytest.param(
            lambda s: ansible_status.errored(s, "no kubeconfig", t(1)),
            [acond("Failure", "True", "Failed", "no kubeconfig", 1)],
            id="errored-adds-only-failure",
        ),
        pytest.param(
            lambda s: ansible_status.failed(s, R2, ["x"], t(1)),
            [acond("Failure", "True", "Failed", "x", 1, R2), acond("Successful", "False", "", "", 1)],
            id="failed-does-not-invent-running",
        ),
        pytest.param(
            lambda s: ansible_status.failed(s, R2, [], t(1)),
            [acond("Failure", "True", "Failed", "unknown playbook failure", 1, R2),
             acond("Successful", "False", "", "", 1)],
            id="failed-without-messages",
        ),
        pytest.param(
            lambda s: ansible_status.running(s, t(1)),
            [acond("Running", "True", "Running", RUN_MSG, 1)],
            id="running-does-not-invent-successful",
        ),
    ],
)
def test_ansible_phase_from_empty_status(phase: Callable[[Any], dict[str, Any]], expected: list[Any]) -> None:
    for empty in (None, {}, {"conditions": None}):
        result = phase(empty)
        assert result["conditions"] == expected
        assert "observedGeneration" not in result


def test_failure_condition_time_kept_when_failing_again() -> None:
    first = ansible_status.failed(None, R2, ["one"], t(1))
    again = ansible_status.failed(ansible_status.running(first, t(2)), R2, ["two"], t(3))
    failure = conditions.get_condition(again["conditions"], "Failure")
    assert failure == acond("Failure", "True", "Failed", "two", 1, R2)


# --- Helm phases --------------------------------------------------------------------------------

MANIFEST = "---\nkind: ConfigMap\n"

HELM_LIFECYCLE: list[Step] = [
    (
        lambda s: helm_status.initialized(s, t(0)),
        [hcond("Initialized", "True", 0)],
        {},
    ),
    (
        lambda s: helm_status.release_failed(s, helm_status.REASON_INSTALL_ERROR, "install boom", t(1)),
        [hcond("Initialized", "True", 0), hcond("ReleaseFailed", "True", 1, "InstallError", "install boom")],
        {},
    ),
    (
        lambda s: helm_status.irreconcilable(s, "sync failed", t(2)),
        [
            hcond("Initialized", "True", 0),
            hcond("ReleaseFailed", "True", 1, "InstallError", "install boom"),
            hcond("Irreconcilable", "True", 2, "ReconcileError", "sync failed"),
        ],
        {},
    ),
    (
        lambda s: helm_status.deployed(s, "rel", MANIFEST, "NOTES", helm_status.REASON_INSTALL_SUCCESSFUL, t(3), 4),
        [hcond("Initialized", "True", 0), hcond("Deployed", "True", 3, "InstallSuccessful", "NOTES")],
        {"deployedRelease": {"name": "rel", "manifest": MANIFEST}, "observedGeneration": 4},
    ),
    (
        lambda s: helm_status.release_failed(s, helm_status.REASON_UPGRADE_ERROR, "upgrade boom", t(4), 5),
        [
            hcond("Initialized", "True", 0),
            hcond("Deployed", "True", 3, "InstallSuccessful", "NOTES"),
            hcond("ReleaseFailed", "True", 4, "UpgradeError", "upgrade boom"),
        ],
        {"deployedRelease": {"name": "rel", "manifest": MANIFEST}, "observedGeneration": 5},
    ),
    (
        lambda s: helm_status.irreconcilable(s, "drift repair failed", t(5), clear_release_failed=True),
        [
            hcond("Initialized", "True", 0),
            hcond("Deployed", "True", 3, "InstallSuccessful", "NOTES"),
            hcond("Irreconcilable", "True", 5, "ReconcileError", "drift repair failed"),
        ],
        {"deployedRelease": {"name": "rel", "manifest": MANIFEST}, "observedGeneration": 5},
    ),
    (
        lambda s: helm_status.deployed(s, "rel", MANIFEST + "x", "", helm_status.REASON_UPGRADE_SUCCESSFUL, t(6), 6),
        [hcond("Initialized", "True", 0), hcond("Deployed", "True", 3, "UpgradeSuccessful")],
        {"deployedRelease": {"name": "rel", "manifest": MANIFEST + "x"}, "observedGeneration": 6},
    ),
    (
        lambda s: helm_status.release_failed(s, helm_status.REASON_UNINSTALL_ERROR, "uninstall boom", t(7)),
        [
            hcond("Initialized", "True", 0),
            hcond("Deployed", "True", 3, "UpgradeSuccessful"),
            hcond("ReleaseFailed", "True", 7, "UninstallError", "uninstall boom"),
        ],
        {"deployedRelease": {"name": "rel", "manifest": MANIFEST + "x"}, "observedGeneration": 6},
    ),
    (
        lambda s: helm_status.uninstalled(s, t(8)),
        [hcond("Initialized", "True", 0), hcond("Deployed", "False", 8, "UninstallSuccessful")],
        {"observedGeneration": 6},
    ),
]


def test_helm_lifecycle() -> None:
    current: dict[str, Any] | None = None
    for index, (phase, expected, others) in enumerate(HELM_LIFECYCLE):
        new = phase(current)
        assert new["conditions"] == expected, f"step {index}"
        assert {k: v for k, v in new.items() if k != "conditions"} == others, f"step {index}"
        current = new


@pytest.mark.parametrize(
    ("reason", "expected_types"),
    [
        (helm_status.REASON_INSTALL_ERROR, ["Initialized", "ReleaseFailed"]),
        (helm_status.REASON_UPGRADE_ERROR, ["Initialized", "ReleaseFailed"]),
        (helm_status.REASON_UNINSTALL_ERROR, ["Irreconcilable", "ReleaseFailed"]),
    ],
)
def test_release_failed_and_irreconcilable(reason: str, expected_types: list[str]) -> None:
    start = {"conditions": [hcond("Irreconcilable", "True", 0, "ReconcileError", "old")]}
    result = helm_status.release_failed(start, reason, "err", t(1))
    assert [c["type"] for c in result["conditions"]] == expected_types
    assert conditions.get_condition(result["conditions"], "ReleaseFailed") == hcond(
        "ReleaseFailed", "True", 1, reason, "err"
    )


def test_irreconcilable_keeps_release_failed_by_default() -> None:
    start = {"conditions": [hcond("ReleaseFailed", "True", 0, "UpgradeError", "x")]}
    kept = helm_status.irreconcilable(start, "sync", t(1))
    dropped = helm_status.irreconcilable(start, "repair", t(1), clear_release_failed=True)
    assert [c["type"] for c in kept["conditions"]] == ["ReleaseFailed", "Initialized", "Irreconcilable"]
    assert [c["type"] for c in dropped["conditions"]] == ["Initialized", "Irreconcilable"]


@pytest.mark.parametrize(
    "call",
    [
        lambda: helm_status.deployed(None, "r", "m", "", helm_status.REASON_INSTALL_ERROR, t(0)),
        lambda: helm_status.deployed(None, "r", "m", "", "Installed", t(0)),
        lambda: helm_status.release_failed(None, helm_status.REASON_RECONCILE_ERROR, "m", t(0)),
        lambda: helm_status.release_failed(None, helm_status.REASON_UPGRADE_SUCCESSFUL, "m", t(0)),
    ],
)
def test_helm_reasons_are_checked(call: Callable[[], Any]) -> None:
    with pytest.raises(ValueError, match="reason"):
        call()


def test_deployed_release_digest() -> None:
    result = helm_status.deployed(None, "rel", "abc", "", helm_status.REASON_INSTALL_SUCCESSFUL, t(0),
                                  store_digest=True)
    assert result["deployedRelease"] == {
        "name": "rel",
        "manifestDigest": "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    }
    assert helm_status.deployed_release("rel", "abc") == {"name": "rel", "manifest": "abc"}


def test_uninstalled_can_keep_deployed_release() -> None:
    start = {"deployedRelease": {"name": "rel", "manifest": MANIFEST}}
    kept = helm_status.uninstalled(start, t(0), keep_deployed_release=True)
    assert kept["deployedRelease"] == start["deployedRelease"]
    assert "deployedRelease" not in helm_status.uninstalled(start, t(0))


# --- preservation, purity, idempotence ----------------------------------------------------------

ALL_PHASES: list[Callable[[Any], dict[str, Any]]] = [
    lambda s: ansible_status.running(s, t(9)),
    lambda s: ansible_status.succeeded(s, R1, t(9), 7),
    lambda s: ansible_status.failed(s, R2, ["x"], t(9), 7),
    lambda s: ansible_status.errored(s, "x", t(9)),
    lambda s: helm_status.initialized(s, t(9)),
    lambda s: helm_status.deployed(s, "rel", MANIFEST, "n", helm_status.REASON_UPGRADE_SUCCESSFUL, t(9), 7),
    lambda s: helm_status.release_failed(s, helm_status.REASON_UPGRADE_ERROR, "x", t(9)),
    lambda s: helm_status.release_failed(s, helm_status.REASON_UNINSTALL_ERROR, "x", t(9)),
    lambda s: helm_status.irreconcilable(s, "x", t(9), clear_release_failed=True),
    lambda s: helm_status.uninstalled(s, t(9)),
]
PHASE_IDS = ["running", "succeeded", "failed", "errored", "initialized", "deployed", "upgrade-error",
             "uninstall-error", "irreconcilable", "uninstalled"]


@pytest.mark.parametrize("phase", ALL_PHASES, ids=PHASE_IDS)
def test_phases_keep_custom_keys_and_conditions_and_do_not_mutate(phase: Callable[[Any], dict[str, Any]]) -> None:
    start: dict[str, Any] = {
        "conditions": [CUSTOM, acond("Running", "True", "Running", RUN_MSG, 0), {"type": "Other", "status": "False"}],
        "phase": "Ready",
        "nested": {"replicas": 3, "urls": ["a", "b"]},
    }
    frozen = copy.deepcopy(start)
    result = phase(start)
    assert start == frozen
    assert result["phase"] == "Ready"
    assert result["nested"] == {"replicas": 3, "urls": ["a", "b"]}
    assert result["conditions"][0] == CUSTOM
    assert {"type": "Other", "status": "False"} in result["conditions"]
    result["nested"]["replicas"] = 99
    assert start["nested"]["replicas"] == 3


@pytest.mark.parametrize("phase", ALL_PHASES, ids=PHASE_IDS)
def test_repeating_a_phase_later_writes_nothing(phase: Callable[[Any], dict[str, Any]]) -> None:
    once = phase({"phase": "x"})
    twice = phase(copy.deepcopy(once))
    assert conditions.status_patch(once, twice) is None


def test_running_again_later_keeps_times() -> None:
    first = ansible_status.running(None, t(0))
    second = ansible_status.running(first, t(30))
    assert second == first
    assert conditions.status_patch(first, second) is None


# --- redaction in phases ------------------------------------------------------------------------

SECRET = "hunter2"


@pytest.mark.parametrize(
    ("phase", "condition_type"),
    [
        (lambda: ansible_status.failed(None, R2, [f"login {SECRET} refused", "other"], t(0), secrets=[SECRET]),
         "Failure"),
        (lambda: ansible_status.errored(None, f"bad token {SECRET}", t(0), secrets=[SECRET]), "Failure"),
        (
            lambda: helm_status.deployed(None, "r", "m", f"pw: {SECRET}", helm_status.REASON_INSTALL_SUCCESSFUL,
                                         t(0), secrets=[SECRET]),
            "Deployed",
        ),
        (
            lambda: helm_status.release_failed(None, helm_status.REASON_INSTALL_ERROR, f"x {SECRET}", t(0),
                                               secrets=[SECRET]),
            "ReleaseFailed",
        ),
        (lambda: helm_status.irreconcilable(None, f"x {SECRET}", t(0), secrets={SECRET}), "Irreconcilable"),
    ],
)
def test_messages_are_redacted(phase: Callable[[], dict[str, Any]], condition_type: str) -> None:
    result = phase()
    condition = conditions.get_condition(result["conditions"], condition_type)
    assert condition is not None
    assert "***" in condition["message"]
    assert SECRET not in repr(result)


# --- playbook status (set_stats) ----------------------------------------------------------------


def test_merge_playbook_status() -> None:
    start = {
        "conditions": [acond("Running", "True", "Running", RUN_MSG, 0), hcond("Ready", "False", 0, "Wait")],
        "keep": 1,
        "drop": 2,
        "nested": {"a": 1, "b": 2},
    }
    stats = {
        "drop": None,
        "added": "yes",
        "nested": {"b": None, "c": 3},
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "StillWaiting"},
            {"type": "Backup", "status": "True"},
            {"type": "Given", "status": "True", "lastTransitionTime": "2000-01-01T00:00:00Z"},
            {"status": "True"},
            "junk",
        ],
    }
    frozen = copy.deepcopy(start)
    result = ansible_status.merge_playbook_status(start, stats, t(1))
    assert start == frozen
    assert result == {
        "conditions": [
            acond("Running", "True", "Running", RUN_MSG, 0),
            hcond("Ready", "False", 0, "StillWaiting"),
            hcond("Backup", "True", 1),
            {"type": "Given", "status": "True", "lastTransitionTime": "2000-01-01T00:00:00Z"},
        ],
        "keep": 1,
        "added": "yes",
        "nested": {"a": 1, "c": 3},
    }


def test_merge_playbook_status_flip_and_then_phase_wins() -> None:
    start = {"conditions": [hcond("Ready", "False", 0, "Wait")]}
    merged = ansible_status.merge_playbook_status(
        start, {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Running", "status": "False"}],
                "db": {"host": "x"}}, t(2)
    )
    assert conditions.get_condition(merged["conditions"], "Ready") == hcond("Ready", "True", 2)
    final = ansible_status.succeeded(merged, R1, t(3))
    assert conditions.get_condition(final["conditions"], "Running") == acond(
        "Running", "True", "Successful", AWAIT_MSG, 3, R1
    )
    assert final["db"] == {"host": "x"}
    assert conditions.get_condition(final["conditions"], "Ready") == hcond("Ready", "True", 2)


# --- status_patch -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param({"a": 1}, {"a": 1}, None, id="equal"),
        pytest.param(None, {}, None, id="no-status-to-empty"),
        pytest.param(None, {"a": 1}, {"status": {"a": 1}}, id="no-status"),
        pytest.param({"a": 1, "b": 2}, {"a": 1}, {"status": {"b": None}}, id="removed-key-is-null"),
        pytest.param({"a": 1}, {}, {"status": {"a": None}}, id="all-removed"),
        pytest.param({"a": 1}, {"a": None}, {"status": {"a": None}}, id="none-means-removed"),
        pytest.param({}, {"a": None}, None, id="none-for-absent-is-noop"),
        pytest.param(
            {"d": {"x": 1, "y": 2, "z": 3}}, {"d": {"x": 1, "y": 5}},
            {"status": {"d": {"y": 5, "z": None}}}, id="nested-only-changes",
        ),
        pytest.param({"d": {"x": 1}, "e": 1}, {"d": {"x": 1}, "e": 2}, {"status": {"e": 2}}, id="nested-equal-omitted"),
        pytest.param({"l": [1, 2]}, {"l": [1, 3]}, {"status": {"l": [1, 3]}}, id="list-replaced-whole"),
        pytest.param({"l": [{"a": 1}]}, {"l": [{"a": 1}]}, None, id="list-equal"),
        pytest.param({"v": 1}, {"v": True}, {"status": {"v": True}}, id="bool-is-not-int"),
        pytest.param({"v": {"x": 1}}, {"v": "s"}, {"status": {"v": "s"}}, id="map-to-scalar"),
        pytest.param({"v": "s"}, {"v": {"x": 1}}, {"status": {"v": {"x": 1}}}, id="scalar-to-map"),
        pytest.param({"v": {"x": 1}}, {"v": {}}, {"status": {"v": {"x": None}}}, id="map-emptied"),
    ],
)
def test_status_patch(old: dict[str, Any] | None, new: dict[str, Any], expected: dict[str, Any] | None) -> None:
    patch = conditions.status_patch(old, new)
    assert patch == expected
    if patch is not None:
        applied = apply_merge_patch(old or {}, patch["status"])
        assert applied == {k: v for k, v in new.items() if v is not None}


def test_status_patch_round_trips_through_every_lifecycle_step() -> None:
    for lifecycle in (ANSIBLE_LIFECYCLE, HELM_LIFECYCLE):
        current: dict[str, Any] = {"custom": {"k": "v"}}
        for phase, _conditions, _others in lifecycle:
            new = phase(current)
            patch = conditions.status_patch(current, new)
            assert patch is not None
            assert apply_merge_patch(current, patch["status"]) == new
            assert "custom" not in patch["status"]
            current = new
