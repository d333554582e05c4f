"""Graceful deletion: preconditions, finalizers, and what a DELETE answers.

A DELETE either removes the object at once or, when finalizers have to run
first, only marks it: ``deletionTimestamp`` set, plus the ``orphan`` or
``foregroundDeletion`` finalizer its propagation policy asks for (which the
garbage collector removes when it is done).  Namespaces are always marked:
phase Terminating, with the ``kubernetes`` finalizer in their spec that the
namespace controller honours.  Once the last finalizer of a marked object is
removed, the update that removed it deletes the object.
"""

from __future__ import annotations

import copy
from typing import Any

from hybrid_operator.localcluster import clock, errors, objects
from hybrid_operator.localcluster.resources import NAMESPACES_KEY, ResourceInfo

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
POLICY_FINALIZERS = {"Orphan": ORPHAN, "Foreground": FOREGROUND}


def check_preconditions(info: ResourceInfo, existing: dict[str, Any], preconditions: dict[str, Any]) -> None:
    """DeleteOptions ``preconditions``: the uid and resourceVersion the client expects (409 otherwise)."""
    meta = existing["metadata"]
    if (preconditions.get("uid") and preconditions["uid"] != meta.get("uid")) or (
        preconditions.get("resourceVersion") and str(preconditions["resourceVersion"]) != meta.get("resourceVersion")
    ):
        raise errors.conflict(info.plural, info.group, str(meta["name"]))


def marked(info: ResourceInfo, existing: dict[str, Any], policy: str | None) -> dict[str, Any] | None:
    """The object marked for deletion when finalizers must run first; None when it goes at once."""
    new = copy.deepcopy(existing)
    finalizers = objects.finalizers(new)
    is_namespace = info.storage_key == NAMESPACES_KEY
    if is_namespace:
        new.setdefault("status", {})["phase"] = "Terminating"
        new.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    wanted = POLICY_FINALIZERS.get(policy or "")
    if wanted and wanted not in finalizers:
        finalizers.append(wanted)
    if not finalizers and not is_namespace:
        return None
    meta = new["metadata"]
    if finalizers:
        meta["finalizers"] = finalizers
    if not meta.get("deletionTimestamp"):
        meta["deletionTimestamp"] = clock.now_rfc3339()
        meta["deletionGracePeriodSeconds"] = 0
        if info.custom and "generation" in meta:
            meta["generation"] = int(meta["generation"]) + 1
    return new


def finished(info: ResourceInfo, obj: dict[str, Any]) -> bool:
    """Whether a marked object has no finalizer left (a namespace also waits for ``spec.finalizers``)."""
    meta = obj["metadata"]
    if not meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    return not (info.storage_key == NAMESPACES_KEY and (obj.get("spec") or {}).get("finalizers"))


def success_status(info: ResourceInfo, name: str, uid: Any) -> dict[str, Any]:
    """What DELETE of a built-in kind answers once the object is gone (custom resources answer the object)."""
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": name, "group": info.group, "kind": info.plural, "uid": uid},
    }
