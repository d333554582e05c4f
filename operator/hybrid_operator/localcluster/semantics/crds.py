"""CustomResourceDefinitions: their validation, their status, and the resources they serve.

A CRD is stored like any object, but it also changes what the server
serves: once written, :class:`~hybrid_operator.localcluster.resources.Registry`
serves its versions (see :mod:`.crud`), and once deleted, its custom
resources go with it.  kube-apiserver's apiextensions server also validates
the definition and reports ``NamesAccepted``/``Established`` conditions,
accepted names and stored versions in its status, which clients wait for
(``kubectl wait --for condition=established``).
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import clock, errors, objects
from hybrid_operator.localcluster.resources import Registry, ResourceInfo, storage_version
from hybrid_operator.localcluster.semantics import celrules

GROUP = "apiextensions.k8s.io"
KIND = "CustomResourceDefinition"


def validate(crd: dict[str, Any]) -> None:
    """Reject a definition kube-apiserver would reject (422 Invalid with every cause)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    name = objects.name(crd)
    causes = []
    for key in ("plural", "kind"):
        if not names.get(key):
            causes.append({"reason": "FieldValueRequired", "field": f"spec.names.{key}", "message": "Required value"})
    if not spec.get("group"):
        causes.append({"reason": "FieldValueRequired", "field": "spec.group", "message": "Required value"})
    if not spec.get("versions"):
        causes.append({"reason": "FieldValueRequired", "field": "spec.versions", "message": "Required value"})
    elif sum(1 for v in spec["versions"] if v.get("storage")) != 1:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.versions",
                       "message": "Invalid value: must have exactly one version marked as storage version"})
    if names.get("plural") and spec.get("group") and name != f"{names['plural']}.{spec['group']}":
        causes.append({"reason": "FieldValueInvalid", "field": "metadata.name",
                       "message": f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'})
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append({"reason": "FieldValueNotSupported", "field": "spec.scope",
                       "message": f'Unsupported value: "{spec.get("scope")}": supported values: '
                                  '"Cluster", "Namespaced"'})
    causes.extend(_rule_causes(spec))
    if causes:
        raise errors.invalid(KIND, GROUP, name, causes)


def _rule_causes(spec: dict[str, Any]) -> list[dict[str, str]]:
    """CEL validation rules that do not compile (only looked at when the CRD has rules)."""
    causes: list[dict[str, str]] = []
    for index, version in enumerate(spec.get("versions") or []):
        schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema") if isinstance(version, dict) else None
        if isinstance(schema, dict) and celrules.has_rules(schema):
            causes.extend(celrules.compile_causes(schema, f"spec.versions[{index}].schema.openAPIV3Schema"))
    return causes


def set_status(crd: dict[str, Any]) -> None:
    """Conditions, accepted names and stored versions, as the apiextensions controllers report them."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    status = crd.setdefault("status", {})
    now = clock.now_rfc3339()
    previous = {c.get("type"): c for c in status.get("conditions") or []}
    status["conditions"] = [
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
         "message": "no conflicts found",
         "lastTransitionTime": previous.get("NamesAccepted", {}).get("lastTransitionTime", now)},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted",
         "lastTransitionTime": previous.get("Established", {}).get("lastTransitionTime", now)},
    ]
    status["acceptedNames"] = names
    stored = list(status.get("storedVersions") or [])
    version = storage_version(crd)
    if version and version not in stored:
        stored.append(version)
    status["storedVersions"] = stored


def served(registry: Registry, crd: dict[str, Any]) -> list[ResourceInfo]:
    """One served resource per storage key of ``crd``'s custom resources."""
    spec = crd.get("spec") or {}
    plural = (spec.get("names") or {}).get("plural")
    seen: dict[str, ResourceInfo] = {}
    for info in registry.all():
        if info.custom and info.group == spec.get("group") and info.plural == plural:
            seen.setdefault(info.storage_key, info)
    return list(seen.values())
