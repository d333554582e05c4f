"""Built-in kinds' schemas: decoding as kube-apiserver's Go structs do, and the OpenAPI documents.

The schemas are the Kubernetes v1.32 OpenAPI definitions as the
``kubernetes-validate`` package (Apache-2.0) ships them, as JSON Schema: one
data file, ``_definitions.json``, read from the installed package (its
Python code, and so ``jsonschema``, is never imported).  It is loaded on the
first write of a built-in object, and each kind's checker is compiled on first
use into nested closures (recursive definitions through a forward cell), so a
ConfigMap costs tens of microseconds and kinds never written cost nothing.

A check does what decoding a JSON body into the kind's Go struct does:

* a value of the wrong JSON type stops it with Go's message (``json: cannot
  unmarshal string into Go struct field DeploymentSpec.spec.replicas of type
  int32``) -- :class:`~.typed.TypeMismatch`;
* fields the struct does not have are dropped, and reported so that
  ``fieldValidation=Strict`` can refuse them and ``Warn`` can warn;
* required fields (the ``required`` lists of the definitions) that are
  absent are reported for a 422 ``Required value``;
* ``null`` fields are dropped (a nil pointer, slice or map, omitted when
  encoded again) and ``null`` list or map elements become Go's zero value
  (``labels: {a: null}`` is ``a: ""``), as the typed decoding leaves them.

The same definitions, converted to OpenAPI v3 (``#/components/schemas``,
no ``null`` in types, IntOrString as ``int-or-string``), are what
``/openapi/v3`` serves, so ``kubectl explain`` works (see :func:`openapi_components`).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybrid_operator.localcluster.semantics.typed import TypeMismatch, json_kind

KUBERNETES_VERSION = "v1.32.0"
DEFINITIONS = f"kubernetes-json-schema/{KUBERNETES_VERSION}-local/_definitions.json"


@dataclass
class Report:
    """What decoding found besides type errors: unknown fields (dropped) and absent required fields."""

    unknown: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


_GO_INTEGERS = frozenset({"int", "int32", "int64", "uint", "uint32", "uint64"})

# value, kube path (with indices), Go path (without), report
Checker = Callable[[Any, str, str, Report], None]


def _data_file() -> Path | None:
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / DEFINITIONS
    return path if path.is_file() else None


@functools.cache
def definitions() -> dict[str, Any]:
    """``$defs`` of the data file, or ``{}`` when the package is not installed (no built-in schemas)."""
    path = _data_file()
    if path is None:
        return {}
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return defs


@functools.cache
def _by_kind() -> dict[tuple[str, str, str], str]:
    index: dict[tuple[str, str, str], str] = {}
    for name, schema in definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            index[(gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))] = name
    return index


def definition_for(group: str, version: str, kind: str) -> str | None:
    return _by_kind().get((group, version, kind))


def covers(group: str, version: str, kind: str) -> bool:
    """Whether built-in kind ``group/version, kind`` has a schema here (so :func:`check` normalizes it)."""
    return definition_for(group, version, kind) is not None


def check(obj: dict[str, Any], group: str, version: str, kind: str) -> Report | None:
    """Decode-check ``obj`` (pruning unknown fields in place); None when the kind has no schema here."""
    name = definition_for(group, version, kind)
    if name is None:
        return None
    report = Report()
    _compiled(name)(obj, "", "", report)
    return report


# --------------------------------------------------------------------------- compiling


_cache: dict[str, Checker] = {}


def _compiled(name: str) -> Checker:
    """The checker of definition ``name``, compiled once (a forward cell breaks recursive definitions)."""
    found = _cache.get(name)
    if found is not None:
        return found
    cell: list[Checker] = []

    def forward(value: Any, path: str, go_path: str, report: Report) -> None:
        cell[0](value, path, go_path, report)

    _cache[name] = forward
    compiled = _node(definitions()[name], _short(name))
    cell.append(compiled)
    _cache[name] = compiled
    return compiled


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def go_type(schema: dict[str, Any]) -> str:
    """How Go spells the type of ``schema`` in its decoding errors (``int32``, ``[]v1.Container``...)."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        parts = ref.rsplit("/", 1)[-1].split(".")
        return f"{parts[-2]}.{parts[-1]}"
    types = _types(schema) or frozenset()
    if "array" in types:
        items = schema.get("items")
        return "[]" + (go_type(items) if isinstance(items, dict) else "interface {}")
    if "object" in types:
        additional = schema.get("additionalProperties")
        return "map[string]" + (go_type(additional) if isinstance(additional, dict) else "interface {}")
    if "integer" in types:
        return str(schema.get("format") or "int")
    if "number" in types:
        return "float64"
    if "boolean" in types:
        return "bool"
    return "[]uint8" if schema.get("format") == "byte" else "string"


def _types(schema: dict[str, Any]) -> frozenset[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None
    listed = [declared] if isinstance(declared, str) else declared
    return frozenset(t for t in listed if t != "null")


def _fits(value: Any, types: frozenset[str]) -> bool:
    if isinstance(value, bool):
        return "boolean" in types
    if isinstance(value, int):
        return bool(types & {"integer", "number"})
    if isinstance(value, float):
        return "number" in types or ("integer" in types and value.is_integer())
    if isinstance(value, str):
        return "string" in types
    if isinstance(value, list):
        return "array" in types
    return "object" in types


def _mismatch(value: Any, owner: str, go_path: str, expected: str) -> TypeMismatch:
    shown = json_kind(value)
    if shown == "number" and expected in _GO_INTEGERS:
        shown = f"number {value}"
    return TypeMismatch(f"json: cannot unmarshal {shown} into Go struct field {owner}.{go_path} of type {expected}")


def _node(schema: dict[str, Any], owner: str) -> Checker:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _referenced(ref.rsplit("/", 1)[-1], owner)
    if "oneOf" in schema:  # IntOrString, Quantity: one of a few scalar types
        union = frozenset().union(*(_types(alt) or frozenset() for alt in schema["oneOf"]))
        return _scalar(union, owner, "intstr.IntOrString" if "integer" in union else "resource.Quantity")
    types = _types(schema)
    if isinstance(schema.get("properties"), dict):
        return _struct(schema, owner)
    if types is not None and "array" in types and isinstance(schema.get("items"), dict):
        return _array(_node(schema["items"], owner), owner, go_type(schema), zero_value(schema["items"]))
    if types is not None and "object" in types and isinstance(schema.get("additionalProperties"), dict):
        additional = schema["additionalProperties"]
        return _map(_node(additional, owner), owner, go_type(schema), zero_value(additional))
    if types is None:
        return _anything
    return _scalar(types, owner, go_type(schema))


def _anything(value: Any, path: str, go_path: str, report: Report) -> None:
    return None


def _referenced(name: str, owner: str) -> Checker:
    """A property whose type is another definition: its own checker, with the field's owner for errors."""
    if name not in definitions():
        return _anything
    target = definitions()[name]
    if "properties" not in target and "$ref" not in target:
        return _node(target, owner)  # a named scalar (Time, Quantity, IntOrString): errors name the owner
    expected = go_type({"$ref": name})

    def check_referenced(value: Any, path: str, go_path: str, report: Report) -> None:
        if value is None:
            return
        if not isinstance(value, dict) and "properties" in target:
            raise _mismatch(value, owner, go_path, expected)
        _compiled(name)(value, path, go_path, report)
    return check_referenced


def _scalar(types: frozenset[str], owner: str, expected: str) -> Checker:
    def check_scalar(value: Any, path: str, go_path: str, report: Report) -> None:
        if value is not None and not _fits(value, types):
            raise _mismatch(value, owner, go_path, expected)
    return check_scalar


def zero_value(schema: dict[str, Any]) -> Any:
    """What Go decodes ``null`` into for an element of this type (``""``, ``0``, ``false``, ``{}``).

    None for pointers Go keeps as nil (IntOrString, Quantity, raw JSON): those stay ``null``.
    """
    if isinstance(schema.get("$ref"), str):
        target = definitions().get(schema["$ref"].rsplit("/", 1)[-1], {})
        return {} if "properties" in target else zero_value(target) if "oneOf" not in target else None
    types = _types(schema) or frozenset()
    zeros: tuple[tuple[str, Any], ...] = (("string", ""), ("integer", 0), ("number", 0), ("boolean", False))
    for name, zero in zeros:
        if name in types:
            return zero
    return None


def _array(item: Checker, owner: str, expected: str, zero: Any = None) -> Checker:
    def check_array(value: Any, path: str, go_path: str, report: Report) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            raise _mismatch(value, owner, go_path, expected)
        for index, element in enumerate(value):
            if element is None and zero is not None:
                value[index] = element = copy.deepcopy(zero)
            item(element, f"{path}[{index}]", go_path, report)
    return check_array


def _map(item: Checker, owner: str, expected: str, zero: Any = None) -> Checker:
    def check_map(value: Any, path: str, go_path: str, report: Report) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            raise _mismatch(value, owner, go_path, expected)
        for key, element in value.items():
            if element is None and zero is not None:
                value[key] = element = copy.deepcopy(zero)
            item(element, f"{path}[{key}]", go_path, report)
    return check_map


def _struct(schema: dict[str, Any], owner: str) -> Checker:
    properties: dict[str, Checker] = {key: _node(sub, owner) for key, sub in schema["properties"].items()
                                      if isinstance(sub, dict)}
    required = tuple(schema.get("required") or ())
    root_fields = ("apiVersion", "kind")

    def check_struct(value: Any, path: str, go_path: str, report: Report) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            raise TypeMismatch(f"json: cannot unmarshal {json_kind(value)} into Go value of type {owner}")
        for key in list(value):
            sub_path = f"{path}.{key}" if path else key
            checker = properties.get(key)
            if value[key] is None and (checker is not None or path):  # Go: nil, omitted when encoded again
                del value[key]
                continue
            if checker is None:
                if not (path == "" and key in root_fields):
                    report.unknown.append(sub_path)
                    del value[key]
                continue
            checker(value[key], sub_path, f"{go_path}.{key}" if go_path else key, report)
        for key in required:
            if key not in value:
                report.missing.append(f"{path}.{key}" if path else key)
    return check_struct
