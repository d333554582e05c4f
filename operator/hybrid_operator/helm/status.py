"""The Helm side's status: ``Initialized``/``Deployed``/``ReleaseFailed``/``Irreconcilable`` and ``deployedRelease``.

Pure phase functions on top of :mod:`hybrid_operator.controller.conditions`, with the condition
types, reasons and the ``deployedRelease`` shape of the SDK's Helm operator (conditions in the
"sparse" shape: an empty reason or message is left out).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from hybrid_operator.controller.conditions import (
    CONDITIONS,
    FALSE,
    TRUE,
    Condition,
    Status,
    conditions_of,
    copy_status,
    redact,
    remove_condition,
    set_condition,
    with_generation,
)

# --- operator-sdk internal/helm/internal/types -----------------------------------------------------
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

DEPLOYED_RELEASE = "deployedRelease"


def _helm(condition_type: str, status: str, reason: str = "", message: str = "") -> Condition:
    return Condition(condition_type, status, reason, message, sparse=True)


def initialized(status: Mapping[str, Any] | None, now: datetime) -> Status:
    """Reconciliation of a live CR began: ``Initialized=True``."""
    new = copy_status(status)
    new[CONDITIONS] = set_condition(conditions_of(new), _helm(INITIALIZED, TRUE), now)
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
    conditions = remove_condition(conditions_of(new), RELEASE_FAILED)
    conditions = remove_condition(conditions, IRRECONCILABLE)
    conditions = set_condition(conditions, _helm(DEPLOYED, TRUE, reason, redact(notes, secrets)), now)
    new[CONDITIONS] = conditions
    new[DEPLOYED_RELEASE] = deployed_release(release_name, manifest, store_digest=store_digest)
    return with_generation(new, generation)


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
        new = copy_status(status)
        conditions = conditions_of(new)
    else:
        new = initialized(status, now)
        conditions = remove_condition(conditions_of(new), IRRECONCILABLE)
    conditions = set_condition(conditions, _helm(RELEASE_FAILED, TRUE, reason, redact(message, secrets)), now)
    new[CONDITIONS] = conditions
    return with_generation(new, generation)


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
    conditions = conditions_of(new)
    if clear_release_failed:
        conditions = remove_condition(conditions, RELEASE_FAILED)
    conditions = set_condition(
        conditions, _helm(IRRECONCILABLE, TRUE, REASON_RECONCILE_ERROR, redact(message, secrets)), now
    )
    new[CONDITIONS] = conditions
    return with_generation(new, generation)


def uninstalled(
    status: Mapping[str, Any] | None, now: datetime, *, keep_deployed_release: bool = False
) -> Status:
    """The release was uninstalled: ``Deployed=False/UninstallSuccessful``, ``ReleaseFailed`` removed.

    ``deployedRelease`` is removed unless ``keep_deployed_release`` (the ``uninstall-wait`` flow,
    which still needs the manifest to wait for its objects).
    """
    new = copy_status(status)
    conditions = remove_condition(conditions_of(new), RELEASE_FAILED)
    conditions = set_condition(conditions, _helm(DEPLOYED, FALSE, REASON_UNINSTALL_SUCCESSFUL), now)
    new[CONDITIONS] = conditions
    if not keep_deployed_release:
        new.pop(DEPLOYED_RELEASE, None)
    return new
