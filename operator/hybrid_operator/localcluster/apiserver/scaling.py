"""The ``/scale`` subresource: a workload seen as an ``autoscaling/v1`` Scale.

``kubectl scale`` (and HPAs) never touch a Deployment directly: they read and
patch ``.../deployments/x/scale``, and client-go decodes the answer as a
``Scale``; getting the Deployment back fails with ``no kind "Deployment" is
registered``.  This module converts an object to its Scale and a written Scale
(PUT or PATCH) back to the replica count to store.
"""

from __future__ import annotations

import copy
from typing import Any

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics import patching
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.writes import Outcome, WriteOptions

SCALE_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")


def selector_string(obj: dict[str, Any]) -> str:
    """``spec.selector`` in label-selector string form (``status.selector`` of a Scale)."""
    selector = (obj.get("spec") or {}).get("selector") or {}
    if not isinstance(selector, dict):
        return ""
    terms = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = ",".join(sorted(str(v) for v in expression.get("values") or []))
        terms.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                      "DoesNotExist": f"!{key}"}.get(operator, ""))
    return ",".join(term for term in terms if term)


def to_scale(obj: dict[str, Any]) -> dict[str, Any]:
    """The Scale view of a stored workload."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {key: meta[key] for key in SCALE_META if key in meta},
            "spec": {"replicas": spec.get("replicas", 0)},
            "status": {"replicas": status.get("replicas", 0), "selector": selector_string(obj)}}


def patched_scale(scale: dict[str, Any], media: str, patch: Any) -> dict[str, Any]:
    """A Scale after a PATCH (a Scale has no lists, so strategic and apply patches merge)."""
    try:
        result = patching.json_patch(copy.deepcopy(scale), patch) if media == "application/json-patch+json" \
            else patching.merge_patch(copy.deepcopy(scale), patch)
    except patching.PatchError as exc:
        raise errors.patch_rejected(str(exc)) from exc
    if not isinstance(result, dict):
        raise errors.bad_request("the patch did not produce an object")
    return result


def scaled(obj: dict[str, Any], scale: Any) -> dict[str, Any]:
    """``obj`` with the replica count of a written Scale (its resourceVersion kept as a precondition)."""
    name = str(obj["metadata"]["name"])
    replicas = ((scale.get("spec") or {}) if isinstance(scale, dict) else {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid("Scale", "autoscaling", name, [{
            "reason": "FieldValueInvalid", "field": "spec.replicas",
            "message": f"Invalid value: {replicas!r}: must be greater than or equal to 0"}])
    updated = copy.deepcopy(obj)
    updated.setdefault("spec", {})["replicas"] = replicas
    wanted_rv = (scale.get("metadata") or {}).get("resourceVersion") if isinstance(scale, dict) else None
    if wanted_rv:
        updated["metadata"]["resourceVersion"] = str(wanted_rv)
    else:
        updated["metadata"].pop("resourceVersion", None)
    return updated


def write(api: ObjectApi, info: ResourceInfo, namespace: str, name: str, scale: Any, opts: WriteOptions) -> Outcome:
    """PUT/PATCH of ``/scale``: store the Scale's replica count, answer with the new Scale."""
    current = api.get(info, namespace, name)
    outcome = api.update(info, namespace, name, scaled(current, scale), opts, "scale")
    return Outcome(to_scale(outcome.obj), outcome.code, outcome.warnings)
