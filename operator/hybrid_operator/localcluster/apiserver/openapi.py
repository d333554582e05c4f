"""OpenAPI v3 ``components.schemas`` for each group/version, and the (empty) v2 document.

kubectl leaves validation to a server whose OpenAPI v3 documents describe
PATCH operations with ``fieldValidation``, and ``kubectl explain`` reads the
schemas of those documents.  Built-in group/versions carry the Kubernetes
v1.32 definitions (see :mod:`..semantics.builtinschemas`), converted from the
JSON Schema they are shipped as back to OpenAPI v3 -- ``#/components/schemas/``
references (wrapped in ``allOf`` when the property has its own description,
as upstream does), no ``null`` in types, IntOrString and Quantity as strings --
limited to what that group/version's kinds reference.  A CRD's group/version
carries each kind's ``openAPIV3Schema`` with ObjectMeta referenced as upstream
publishes it, so ``kubectl explain <kind>.spec`` works too.

``/openapi/v2`` answers 200 with an empty protobuf document: kubectl always
validates a ``kind: List`` client-side against v2 (its v3 path refuses
``v1/List``), a 404 makes that fail, and an empty document makes it a no-op,
while every item is still POSTed with ``fieldValidation=Strict`` and validated
here.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics import builtinschemas

V2_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
PREFIX = "#/components/schemas/"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_SCALARS = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
        "description": "IntOrString is a type that can hold an int32 or a string.", "type": "string",
        "format": "int-or-string"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "description": "Quantity is a fixed-point representation of a number.", "type": "string"},
}


def _convert(node: Any, top: bool = False) -> Any:
    """One JSON Schema node as OpenAPI v3."""
    if isinstance(node, list):
        return [_convert(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "additionalProperties" and value is False:
            continue
        out[key] = _convert_member(key, value, top)
    if "$ref" in out and len(out) > 1:
        out["allOf"] = [{"$ref": out.pop("$ref")}]
    return out


def _convert_member(key: str, value: Any, top: bool) -> Any:
    if key == "$ref" and isinstance(value, str):
        return PREFIX + value.rsplit("/", 1)[-1]
    if key == "type" and isinstance(value, list):
        types = [t for t in value if t != "null"]
        return types[0] if len(types) == 1 else types
    if key == "properties" and isinstance(value, dict):
        properties = {name: _convert(sub) for name, sub in value.items()}
        if top:  # upstream has no enums on apiVersion and kind
            for name in ("apiVersion", "kind"):
                if isinstance(properties.get(name), dict):
                    properties[name].pop("enum", None)
        return properties
    return _convert(value)


@functools.cache
def _converted(name: str) -> dict[str, Any]:
    if name in _SCALARS:
        return dict(_SCALARS[name])
    converted: dict[str, Any] = _convert(builtinschemas.definitions()[name], top=True)
    return converted


def _closure(roots: list[str]) -> list[str]:
    """``roots`` and every definition they reference, transitively."""
    definitions = builtinschemas.definitions()
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        nodes: list[Any] = [definitions[name]]
        while nodes:
            node = nodes.pop()
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str):
                    stack.append(ref.rsplit("/", 1)[-1])
                nodes.extend(node.values())
            elif isinstance(node, list):
                nodes.extend(node)
    return sorted(seen)


def _crd_schema_name(info: ResourceInfo) -> str:
    return ".".join([*reversed(info.group.split(".")), info.version, info.kind])


def _crd_component(info: ResourceInfo) -> dict[str, Any]:
    schema: dict[str, Any] = copy.deepcopy(info.schema) if info.schema else {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}
    properties: dict[str, Any] = schema.setdefault("properties", {})
    properties.setdefault("apiVersion", {"type": "string"})
    properties.setdefault("kind", {"type": "string"})
    if builtinschemas.definitions():
        properties["metadata"] = {"allOf": [{"$ref": PREFIX + OBJECT_META}],
                                  "description": "Standard object's metadata."}
    schema["x-kubernetes-group-version-kind"] = [{"group": info.group, "version": info.version, "kind": info.kind}]
    return schema


def components(infos: list[ResourceInfo]) -> dict[str, Any]:
    """``components.schemas`` for the kinds of one group/version."""
    roots: list[str] = []
    schemas: dict[str, Any] = {}
    for info in infos:
        if info.custom:
            schemas[_crd_schema_name(info)] = _crd_component(info)
            roots.append(OBJECT_META)
            continue
        name = builtinschemas.definition_for(info.group, info.version, info.kind)
        if name is not None:
            roots.append(name)
    for name in _closure(roots):
        schemas[name] = _converted(name)
    return dict(sorted(schemas.items()))
