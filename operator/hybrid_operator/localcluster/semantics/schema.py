"""Structural-schema handling for custom resources: pruning, defaulting, validation.

kube-apiserver runs every custom resource it decodes through the CRD version's
``openAPIV3Schema``: unknown fields are pruned (or reported, under
``fieldValidation=Strict``), non-nullable ``null`` values without a default
are dropped, ``default`` values are filled in, and the result is validated.
Clients (kubectl, helm, Ansible, kopf) see the outcome as stored objects or
as a 422 ``Invalid`` ``Status`` whose causes use kube-apiserver's wording,
which this module reproduces.

Objects and schemas are plain JSON values (dicts, lists, scalars).  Paths
are written the way kube-apiserver writes them: ``spec.size``,
``spec.items[0].name``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

Schema = dict[str, Any]
Cause = dict[str, str]

PRESERVE_UNKNOWN = "x-kubernetes-preserve-unknown-fields"
EMBEDDED_RESOURCE = "x-kubernetes-embedded-resource"
INT_OR_STRING = "x-kubernetes-int-or-string"

# Kept at the resource root (and in embedded resources) whatever the schema says.
_TYPE_META_FIELDS = ("apiVersion", "kind", "metadata")

REASON_INVALID = "FieldValueInvalid"
REASON_REQUIRED = "FieldValueRequired"
REASON_NOT_SUPPORTED = "FieldValueNotSupported"
REASON_TYPE_INVALID = "FieldValueTypeInvalid"
REASON_TOO_LONG = "FieldValueTooLong"
REASON_TOO_MANY = "FieldValueTooMany"


# --------------------------------------------------------------------------- paths


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _index(path: str, index: int) -> str:
    return f"{path}[{index}]"


# --------------------------------------------------------------------------- pruning


def prune(obj: Any, schema: Schema) -> Any:
    """A copy of ``obj`` without the fields ``schema`` does not declare.

    Also drops ``null`` values of non-nullable properties that have no
    default, as kube-apiserver does right after pruning.
    """
    dropped: list[str] = []
    return _prune(obj, schema, "", dropped, root=True)


def unknown_fields(obj: Any, schema: Schema) -> list[str]:
    """Paths (``spec.foo``) that :func:`prune` would drop as undeclared."""
    dropped: list[str] = []
    _prune(obj, schema, "", dropped, root=True)
    return dropped


def _prune(value: Any, schema: Schema | None, path: str, dropped: list[str], *, root: bool = False) -> Any:
    if schema is None:
        return copy.deepcopy(value)
    if isinstance(value, dict):
        return _prune_object(value, schema, path, dropped, root=root)
    if isinstance(value, list):
        items = schema.get("items")
        item_schema = items if isinstance(items, dict) else None
        return [_prune(item, item_schema, _index(path, i), dropped) for i, item in enumerate(value)]
    return value


def _prune_object(
    value: dict[str, Any], schema: Schema, path: str, dropped: list[str], *, root: bool
) -> dict[str, Any]:
    properties: dict[str, Schema] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    keeps_unknown = schema.get(PRESERVE_UNKNOWN) is True or additional is True
    keeps_type_meta = root or schema.get(EMBEDDED_RESOURCE) is True
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub_path = _child(path, key)
        if keeps_type_meta and key in _TYPE_META_FIELDS:
            out[key] = copy.deepcopy(item)
            continue
        sub_schema = properties.get(key)
        if sub_schema is None and isinstance(additional, dict):
            sub_schema = additional
        if sub_schema is not None:
            if _is_dropped_null(item, sub_schema):
                continue
            out[key] = _prune(item, sub_schema, sub_path, dropped)
        elif keeps_unknown:
            out[key] = copy.deepcopy(item)
        else:
            dropped.append(sub_path)
    return out


def _is_dropped_null(value: Any, schema: Schema) -> bool:
    return value is None and not schema.get("nullable", False) and "default" not in schema


# --------------------------------------------------------------------------- defaulting


def apply_defaults(obj: Any, schema: Schema) -> Any:
    """A copy of ``obj`` with ``default`` values filled in for absent properties.

    Defaults are applied top-down, so a defaulted object gets its own nested
    defaults too; a ``null`` of a non-nullable property counts as absent.
    Root ``metadata`` is left alone.
    """
    result = copy.deepcopy(obj)
    _default_in_place(result, schema, root=True)
    return result


def _default_in_place(value: Any, schema: Schema | None, *, root: bool = False) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        _default_object(value, schema, root=root)
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return
        for i, item in enumerate(value):
            if _wants_default(item, items):
                value[i] = copy.deepcopy(items["default"])
            _default_in_place(value[i], items)


def _default_object(value: dict[str, Any], schema: Schema, *, root: bool) -> None:
    properties: dict[str, Schema] = schema.get("properties") or {}
    for key, prop in properties.items():
        if root and key == "metadata":
            continue
        if "default" in prop and (key not in value or _wants_default(value[key], prop)):
            value[key] = copy.deepcopy(prop["default"])
    additional = schema.get("additionalProperties")
    for key in list(value):
        if root and key in _TYPE_META_FIELDS:
            continue
        sub_schema = properties.get(key)
        if sub_schema is None and isinstance(additional, dict):
            sub_schema = additional
            if _wants_default(value[key], sub_schema):
                value[key] = copy.deepcopy(sub_schema["default"])
        _default_in_place(value[key], sub_schema)


def _wants_default(value: Any, schema: Schema) -> bool:
    return value is None and "default" in schema and not schema.get("nullable", False)


# --------------------------------------------------------------------------- value rendering


def go_value(value: Any) -> str:
    """``value`` printed the way kube-apiserver prints a bad value in a cause."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if value is None:
        return "null"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _go_float(value: float) -> str:
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def json_type(value: Any) -> str:
    """The OpenAPI type name of a JSON value (``integer`` for whole numbers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


# --------------------------------------------------------------------------- causes


def _cause(reason: str, path: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": path}


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return _cause(REASON_INVALID, path, f"Invalid value: {go_value(value)}: {detail}")


def _type_invalid(path: str, expected: str, actual: str) -> Cause:
    detail = f"{path} in body must be of type {expected}: {json.dumps(actual)}"
    return _cause(REASON_TYPE_INVALID, path, f"Invalid value: {json.dumps(actual)}: {detail}")


def _required(path: str) -> Cause:
    return _cause(REASON_REQUIRED, path, "Required value")


def _not_supported(path: str, value: Any, allowed: list[Any]) -> Cause:
    names = [item if isinstance(item, str) else json.dumps(item, separators=(",", ":")) for item in allowed]
    message = f"Unsupported value: {go_value(value)}"
    if names:
        message += ": supported values: " + ", ".join(json.dumps(name) for name in names)
    return _cause(REASON_NOT_SUPPORTED, path, message)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


# --------------------------------------------------------------------------- validation


def validate(obj: Any, schema: Schema) -> list[Cause]:
    """Causes (``{reason, message, field}``) for everything ``obj`` breaks in ``schema``.

    At the resource root ``apiVersion``/``kind`` are validated like any
    property, while ``metadata`` is skipped except for a ``name`` constraint.
    """
    if isinstance(obj, dict) and isinstance(schema.get("properties"), dict):
        root_schema = dict(schema)
        props = dict(schema["properties"])
        metadata = props.pop("metadata", None)
        root_schema["properties"] = props
        causes = _validate(obj, root_schema, "", skip={"metadata"})
        causes.extend(_validate_metadata_name(obj.get("metadata"), metadata))
        return causes
    return _validate(obj, schema, "")


def _validate_metadata_name(metadata: Any, schema: Schema | None) -> list[Cause]:
    if not isinstance(metadata, dict) or not isinstance(schema, dict):
        return []
    name_schema = (schema.get("properties") or {}).get("name")
    if not isinstance(name_schema, dict) or "name" not in metadata:
        return []
    return _validate(metadata["name"], name_schema, "metadata.name")


def _validate(value: Any, schema: Schema, path: str, skip: set[str] | None = None) -> list[Cause]:
    if value is None and (schema.get("nullable") or not _declared_types(schema)):
        return []
    type_cause = _check_type(value, schema, path)
    if type_cause is not None:
        return [type_cause]
    causes: list[Cause] = []
    for check in _CHECKS:
        causes.extend(check(value, schema, path))
    if isinstance(value, dict):
        causes.extend(_validate_object(value, schema, path, skip or set()))
    elif isinstance(value, list):
        causes.extend(_validate_array(value, schema, path))
    causes.extend(_validate_composition(value, schema, path))
    return causes


def _declared_types(schema: Schema) -> list[str]:
    if schema.get(INT_OR_STRING):
        return ["integer", "string"]
    declared = schema.get("type")
    if isinstance(declared, str) and declared:
        return [declared]
    if isinstance(declared, list):
        return [str(item) for item in declared]
    return []


def _check_type(value: Any, schema: Schema, path: str) -> Cause | None:
    declared = _declared_types(schema)
    if not declared:
        return None
    actual = json_type(value)
    if actual in declared:
        return None
    if actual == "number" and "integer" in declared and float(value).is_integer():
        return None
    if actual == "integer" and "number" in declared:
        return None
    return _type_invalid(path, ",".join(declared), actual)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_enum(value: Any, schema: Schema, path: str) -> list[Cause]:
    allowed = schema.get("enum")
    if not isinstance(allowed, list) or any(_json_equal(value, item) for item in allowed):
        return []
    return [_not_supported(path, value, allowed)]


def _json_equal(left: Any, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    return bool(left == right)


def _check_maximum(value: Any, schema: Schema, path: str) -> list[Cause]:
    maximum: Any = schema.get("maximum")
    if not _is_number(value) or not _is_number(maximum):
        return []
    exclusive = schema.get("exclusiveMaximum") is True
    if value > maximum or (exclusive and value == maximum):
        relation = "less than" if exclusive else "less than or equal to"
        return [_invalid(path, value, f"{path} in body should be {relation} {go_value(maximum)}")]
    return []


def _check_minimum(value: Any, schema: Schema, path: str) -> list[Cause]:
    minimum: Any = schema.get("minimum")
    if not _is_number(value) or not _is_number(minimum):
        return []
    exclusive = schema.get("exclusiveMinimum") is True
    if value < minimum or (exclusive and value == minimum):
        relation = "greater than" if exclusive else "greater than or equal to"
        return [_invalid(path, value, f"{path} in body should be {relation} {go_value(minimum)}")]
    return []


def _check_multiple_of(value: Any, schema: Schema, path: str) -> list[Cause]:
    factor: Any = schema.get("multipleOf")
    if _is_number(value) and _is_number(factor) and factor > 0 and not float(value / factor).is_integer():
        return [_invalid(path, value, f"{path} in body should be a multiple of {go_value(factor)}")]
    return []


def _check_string(value: Any, schema: Schema, path: str) -> list[Cause]:
    if not isinstance(value, str):
        return []
    causes: list[Cause] = []
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and len(value) > max_length:
        detail = f"may not be more than {_plural(max_length, 'byte')}"
        causes.append(_cause(REASON_TOO_LONG, path, f"Too long: {detail}"))
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and len(value) < min_length:
        causes.append(_invalid(path, value, f"{path} in body should be at least {min_length} chars long"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and not _matches(pattern, value):
        causes.append(_invalid(path, value, f"{path} in body should match '{pattern}'"))
    return causes


def _matches(pattern: str, value: str) -> bool:
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return True


def _check_array_bounds(value: Any, schema: Schema, path: str) -> list[Cause]:
    if not isinstance(value, list):
        return []
    causes: list[Cause] = []
    max_items = schema.get("maxItems")
    if isinstance(max_items, int) and len(value) > max_items:
        detail = f"must have at most {_plural(max_items, 'item')}"
        causes.append(_cause(REASON_TOO_MANY, path, f"Too many: {len(value)}: {detail}"))
    min_items = schema.get("minItems")
    if isinstance(min_items, int) and len(value) < min_items:
        causes.append(_invalid(path, len(value), f"{path} in body should have at least {min_items} items"))
    return causes


def _check_object_bounds(value: Any, schema: Schema, path: str) -> list[Cause]:
    if not isinstance(value, dict):
        return []
    causes: list[Cause] = []
    max_props = schema.get("maxProperties")
    if isinstance(max_props, int) and len(value) > max_props:
        detail = f"must have at most {_plural(max_props, 'item')}"
        causes.append(_cause(REASON_TOO_MANY, path, f"Too many: {len(value)}: {detail}"))
    min_props = schema.get("minProperties")
    if isinstance(min_props, int) and len(value) < min_props:
        detail = f"{path} in body should have at least {min_props} properties"
        causes.append(_invalid(path, min_props, detail))
    return causes


_CHECKS: tuple[Callable[[Any, Schema, str], list[Cause]], ...] = (
    _check_string,
    _check_maximum,
    _check_minimum,
    _check_multiple_of,
    _check_array_bounds,
    _check_object_bounds,
    _check_enum,
)


def _validate_object(value: dict[str, Any], schema: Schema, path: str, skip: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    for key in schema.get("required") or []:
        if key not in value and key not in skip:
            causes.append(_required(_child(path, key)))
    properties: dict[str, Schema] = schema.get("properties") or {}
    for key, prop in properties.items():
        if key in value and key not in skip and isinstance(prop, dict):
            causes.extend(_validate(value[key], prop, _child(path, key)))
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        for key, item in value.items():
            if key not in properties and key not in skip:
                causes.extend(_validate(item, additional, _child(path, key)))
    return causes


def _validate_array(value: list[Any], schema: Schema, path: str) -> list[Cause]:
    items = schema.get("items")
    if not isinstance(items, dict):
        return []
    causes: list[Cause] = []
    for i, item in enumerate(value):
        causes.extend(_validate(item, items, _index(path, i)))
    return causes


def _fewest(results: list[list[Cause]]) -> list[Cause]:
    """The failures of the alternative that came closest to validating."""
    best = results[0]
    for result in results[1:]:
        if len(result) < len(best):
            best = result
    return best


def _composite(path: str, message: str) -> Cause:
    return _invalid(path, "", f"{json.dumps(path)} {message}")


def _validate_composition(value: Any, schema: Schema, path: str) -> list[Cause]:
    """``allOf``/``anyOf``/``oneOf``/``not``, reported the way kube-openapi words them."""
    return [
        *_all_of(value, _alternatives(schema, "allOf"), path),
        *_any_of(value, _alternatives(schema, "anyOf"), path),
        *_one_of(value, _alternatives(schema, "oneOf"), path),
        *_not(value, schema.get("not"), path),
    ]


def _alternatives(schema: Schema, keyword: str) -> list[Schema]:
    return [s for s in schema.get(keyword) or [] if isinstance(s, dict)]


def _all_of(value: Any, schemas: list[Schema], path: str) -> list[Cause]:
    failed = [result for result in (_validate(value, sub, path) for sub in schemas) if result]
    if not failed:
        return []
    suffix = ". None validated" if len(failed) == len(schemas) else ""
    causes = [cause for result in failed for cause in result]
    causes.append(_composite(path, f"must validate all the schemas (allOf){suffix}"))
    return causes


def _any_of(value: Any, schemas: list[Schema], path: str) -> list[Cause]:
    if not schemas:
        return []
    results = [_validate(value, sub, path) for sub in schemas]
    if not all(results):
        return []
    return [_composite(path, "must validate at least one schema (anyOf)"), *_fewest(results)]


def _one_of(value: Any, schemas: list[Schema], path: str) -> list[Cause]:
    if not schemas:
        return []
    results = [_validate(value, sub, path) for sub in schemas]
    valid = sum(1 for r in results if not r)
    if valid == 1:
        return []
    if valid > 1:
        return [_composite(path, f"must validate one and only one schema (oneOf). Found {valid} valid alternatives")]
    return [_composite(path, "must validate one and only one schema (oneOf). Found none valid"), *_fewest(results)]


def _not(value: Any, negated: Any, path: str) -> list[Cause]:
    if isinstance(negated, dict) and not _validate(value, negated, path):
        return [_composite(path, "must not validate the schema (not)")]
    return []


# --------------------------------------------------------------------------- pipeline


def prepare(obj: Any, schema: Schema) -> tuple[Any, list[Cause]]:
    """Prune, then default, then validate, in kube-apiserver's order."""
    pruned = prune(obj, schema)
    defaulted = apply_defaults(pruned, schema)
    return defaulted, validate(defaulted, schema)
