"""Fields an update may not change, refused with kube-apiserver's messages (422 Invalid).

kube-apiserver's update validation of a few kinds forbids changing what was
fixed at creation: a Deployment's, ReplicaSet's or DaemonSet's
``spec.selector``, a StatefulSet's spec but for a few fields (so its
``volumeClaimTemplates``, ``selector`` and ``serviceName``), a Job's
``selector`` and pod ``template``, a Service's ``clusterIP``/``clusterIPs`` once
set, a PersistentVolumeClaim's spec but for its storage request, and the data
of a ConfigMap or Secret marked ``immutable``.  Kube prints the refused value
with Go's ``%#v``; this prints it as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hybrid_operator.localcluster import objects

Cause = dict[str, str]
Obj = dict[str, Any]


def _invalid(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field,
            "message": f"Invalid value: {json.dumps(value, separators=(',', ':'), sort_keys=True)}: {detail}"}


def _forbidden(field: str, detail: str) -> Cause:
    return {"reason": "FieldValueForbidden", "field": field, "message": f"Forbidden: {detail}"}


def _immutable(old: Obj, new: Obj, *path: str) -> list[Cause]:
    before, after = objects.dig(old, *path), objects.dig(new, *path)
    if before == after:
        return []
    return [_invalid(".".join(path), after, "field is immutable")]


def _selector_only(old: Obj, new: Obj) -> list[Cause]:
    return _immutable(old, new, "spec", "selector")


_STATEFULSET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy",
                        "persistentVolumeClaimRetentionPolicy", "minReadySeconds")


def _stateful_set(old: Obj, new: Obj) -> list[Cause]:
    def fixed(obj: Obj) -> Obj:
        spec = obj.get("spec")
        return {k: v for k, v in spec.items() if k not in _STATEFULSET_MUTABLE} if isinstance(spec, dict) else {}
    if fixed(old) == fixed(new):
        return []
    return [_forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                               "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                               "'minReadySeconds' are forbidden")]


def _job(old: Obj, new: Obj) -> list[Cause]:
    return [*_immutable(old, new, "spec", "selector"), *_immutable(old, new, "spec", "template"),
            *_immutable(old, new, "spec", "completionMode")]


def _service(old: Obj, new: Obj) -> list[Cause]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if "ExternalName" in (old_spec.get("type"), new_spec.get("type")):
        return []
    causes: list[Cause] = []
    old_ip, new_ip = old_spec.get("clusterIP"), new_spec.get("clusterIP")
    if old_ip and new_ip and new_ip != old_ip:  # an update without one keeps the allocated address
        if old_spec.get("clusterIPs") != new_spec.get("clusterIPs"):
            causes.append(_invalid("spec.clusterIPs[0]", new_spec.get("clusterIPs"), "may not change once set"))
        causes.append(_invalid("spec.clusterIP", new_ip, "field is immutable"))
    return causes


def _pvc(old: Obj, new: Obj) -> list[Cause]:
    def fixed(obj: Obj) -> Obj:
        spec = dict(obj.get("spec") or {})
        resources = dict(spec.pop("resources", None) or {})
        resources.pop("requests", None)
        spec.pop("volumeAttributesClassName", None)
        if resources:
            spec["resources"] = resources
        if not old.get("spec", {}).get("volumeName"):
            spec.pop("volumeName", None)  # binding sets it
        if not old.get("spec", {}).get("storageClassName"):
            spec.pop("storageClassName", None)  # the default class is assigned retroactively, as kube >= 1.28 does
        return spec
    if fixed(old) == fixed(new):
        return []
    return [_forbidden("spec", "spec is immutable after creation except resources.requests and "
                               "volumeAttributesClassName for bound claims")]


def _immutable_data(old: Obj, new: Obj) -> list[Cause]:
    if old.get("immutable") is not True:
        return []
    causes = []
    if new.get("immutable") is not True:
        causes.append(_forbidden("immutable", "field is immutable when `immutable` is set"))
    for key in ("data", "binaryData", "stringData"):
        if (old.get(key) or {}) != (new.get(key) or {}):
            causes.append(_forbidden(key, "field is immutable when `immutable` is set"))
    return causes


_RULES: dict[tuple[str, str], Callable[[Obj, Obj], list[Cause]]] = {
    ("apps", "Deployment"): _selector_only,
    ("apps", "ReplicaSet"): _selector_only,
    ("apps", "DaemonSet"): _selector_only,
    ("apps", "StatefulSet"): _stateful_set,
    ("batch", "Job"): _job,
    ("", "Service"): _service,
    ("", "PersistentVolumeClaim"): _pvc,
    ("", "ConfigMap"): _immutable_data,
    ("", "Secret"): _immutable_data,
}


def update_causes(group: str, kind: str, old: Obj, new: Obj) -> list[Cause]:
    """Every field ``new`` changes that kube-apiserver would not let an update change."""
    rule = _RULES.get((group, kind))
    return rule(old, new) if rule is not None else []
