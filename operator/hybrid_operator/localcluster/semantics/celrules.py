"""CRD validation rules (``x-kubernetes-validations``), evaluated with CEL as kube-apiserver does.

Kubebuilder's ``XValidation`` markers put CEL rules on schema nodes; kube-apiserver
evaluates each rule with ``self`` bound to the value at that node and, on
update, ``oldSelf`` to the old value at the same place.  A rule that mentions
``oldSelf`` is a *transition rule*: it runs only when there is an old value
(for list items, only in ``x-kubernetes-list-type: map`` lists, whose items
correlate by key).  A failing rule is a 422 cause on the node's path with the
rule's ``message`` (or ``messageExpression``'s string, or ``failed rule:
<rule>``), its ``reason`` and ``fieldPath`` if given.  Unchanged values are not
re-validated (kube's validation ratcheting), so tightening a rule never breaks
an object nobody touches.  A CRD whose rules do not compile is refused when it
is written (:func:`compile_causes`).

The engine is ``cel-expr-python`` (Google's cel-cpp; the same maintainers as
cel-go, so heterogeneous numbers, overflow errors, optionals and the strings
extension behave as in Kubernetes).  It is imported only when a CRD has rules.
Limits, documented in the README: it has no cost estimation, so a CRD is
never rejected for its rules' estimated cost; each evaluation has a fixed
budget of 10,000 comprehension iterations (kube's budget is in cost units,
1,000,000 per call), and running out of it is reported as kube reports an
exhausted budget.  Kubernetes-only CEL libraries (``isSorted``, ``quantity``,
``url``, ``ip``...) and ``optionalOldSelf`` are not available.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

VALIDATIONS = "x-kubernetes-validations"
Cause = dict[str, str]
Schema = dict[str, Any]
_ABSENT = object()
_REASONS = {"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"}


_has_rules: dict[int, tuple[Any, bool]] = {}


def has_rules(schema: Any) -> bool:
    """Whether any node of ``schema`` carries validation rules (one pass over it, remembered per schema)."""
    known = _has_rules.get(id(schema))
    if known is None or known[0] is not schema:
        if len(_has_rules) > 256:
            _has_rules.clear()
        known = (schema, bool(schema) and VALIDATIONS in json.dumps(schema))
        _has_rules[id(schema)] = known
    return known[1]


@dataclass(frozen=True)
class _Compiled:
    program: Any
    message_program: Any
    transition: bool


@functools.cache
def _env() -> Any:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

    return cel.NewEnv(variables={"self": cel.Type.DYN, "oldSelf": cel.Type.DYN},
                      extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_bindings.ExtBindings()])


@functools.lru_cache(maxsize=4096)
def _compile(rule: str, message_expression: str) -> _Compiled | str:
    """The compiled rule, or the compiler's error text."""
    try:
        program = _env().compile(rule)
        message_program = _env().compile(message_expression) if message_expression else None
    except RuntimeError as exc:
        return str(exc)
    return _Compiled(program, message_program, "oldSelf" in rule)


def _type_name(schema: Schema) -> str:
    declared = schema.get("type")
    return declared if isinstance(declared, str) else "object"


def _plain(value: Any) -> Any:
    if hasattr(value, "plain_value"):
        return value.plain_value()
    return value


def _evaluate(compiled: _Compiled, data: dict[str, Any]) -> tuple[bool | None, str]:
    """(passed, error): passed is None when the rule could not be evaluated."""
    from cel_expr_python import cel

    try:
        result = compiled.program.eval(data=data)
    except RuntimeError as exc:
        return None, str(exc)
    if result.type() == cel.Type.ERROR:
        return None, str(result.value())
    return bool(_plain(result) is True), ""


def _message(rule: dict[str, Any], compiled: _Compiled, data: dict[str, Any]) -> str:
    if compiled.message_program is not None:
        try:
            produced = _plain(compiled.message_program.eval(data=data))
        except RuntimeError:
            produced = None
        if isinstance(produced, str) and produced.strip():
            return produced
    return str(rule.get("message") or f"failed rule: {rule.get('rule')}")


def _check_node(schema: Schema, value: Any, old: Any, path: str, causes: list[Cause]) -> None:
    for rule in schema.get(VALIDATIONS) or []:
        if not isinstance(rule, dict) or not isinstance(rule.get("rule"), str):
            continue
        compiled = _compile(rule["rule"], str(rule.get("messageExpression") or ""))
        field = path + str(rule.get("fieldPath") or "") if rule.get("fieldPath") else path
        if isinstance(compiled, str):
            causes.append({"reason": "FieldValueInvalid", "field": field,
                           "message": f"Invalid value: \"{_type_name(schema)}\": compilation failed: {compiled}"})
            continue
        if compiled.transition and old is _ABSENT:
            continue
        data = {"self": value} if old is _ABSENT else {"self": value, "oldSelf": old}
        passed, error = _evaluate(compiled, data)
        if passed:
            continue
        causes.append(_failure(schema, rule, compiled, data, field, error))


def _failure(schema: Schema, rule: dict[str, Any], compiled: _Compiled, data: dict[str, Any], field: str,
             error: str) -> Cause:
    if "budget" in error.lower():
        return {"reason": "FieldValueForbidden", "field": field,
                "message": "Forbidden: validation failed due to running out of cost budget, "
                           "no further validation rules will be run"}
    if error:
        return {"reason": "FieldValueInvalid", "field": field,
                "message": f"Invalid value: \"{_type_name(schema)}\": {rule['rule']}: {error}"}
    reason = rule.get("reason") if rule.get("reason") in _REASONS else "FieldValueInvalid"
    message = _message(rule, compiled, data)
    prefix = {"FieldValueForbidden": "Forbidden", "FieldValueRequired": "Required value",
              "FieldValueDuplicate": "Duplicate value"}.get(str(reason))
    text = f"{prefix}: {message}" if prefix else f"Invalid value: \"{_type_name(schema)}\": {message}"
    return {"reason": str(reason), "field": field, "message": text}


def _walk(schema: Schema, value: Any, old: Any, path: str, causes: list[Cause]) -> None:
    if value is None or value == old:  # ratcheting: an unchanged value is not validated again
        return
    if VALIDATIONS in schema:
        _check_node(schema, value, old, path, causes)
    if isinstance(value, dict):
        _walk_object(schema, value, old if isinstance(old, dict) else {}, path, causes)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        _walk_list(schema, value, old, path, causes)


def _walk_object(schema: Schema, value: dict[str, Any], old: dict[str, Any], path: str,
                 causes: list[Cause]) -> None:
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        sub = properties.get(key, additional if isinstance(additional, dict) else None)
        if isinstance(sub, dict):
            child = f"{path}.{key}" if path else key
            if key not in properties:
                child = f"{path}[{key}]" if path else key
            _walk(sub, item, old.get(key, _ABSENT), child, causes)


def _walk_list(schema: Schema, value: list[Any], old: Any, path: str, causes: list[Cause]) -> None:
    items: Schema = schema["items"]
    keys = schema.get("x-kubernetes-list-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
    previous: dict[Any, Any] = {}
    if keys and isinstance(old, list):
        previous = {_identity(item, keys): item for item in old if isinstance(item, dict)}
    for index, item in enumerate(value):
        before = previous.get(_identity(item, keys), _ABSENT) if keys and isinstance(item, dict) else _ABSENT
        _walk(items, item, before, f"{path}[{index}]", causes)


def _identity(item: dict[str, Any], keys: list[str]) -> str:
    return json.dumps([item.get(key) for key in keys], sort_keys=True)


def validate(schema: Schema, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
    """The failed rules of ``obj`` (``old``: the stored object, for transition rules and ratcheting)."""
    causes: list[Cause] = []
    root_old = old if old is not None else _ABSENT
    if VALIDATIONS in schema:
        _check_node(schema, obj, root_old, "", causes)
    properties = schema.get("properties") or {}
    for key, sub in properties.items():
        if key in obj and key != "metadata" and isinstance(sub, dict):
            _walk(sub, obj[key], (old or {}).get(key, _ABSENT), key, causes)
    return causes


def compile_causes(schema: Schema, path: str) -> list[Cause]:
    """A 422 cause for every rule of ``schema`` (a CRD version's ``openAPIV3Schema`` at ``path``) that does
    not compile, as kube-apiserver refuses such a CRD."""
    causes: list[Cause] = []
    for index, rule in enumerate(schema.get(VALIDATIONS) or []):
        if not isinstance(rule, dict) or not isinstance(rule.get("rule"), str):
            continue
        compiled = _compile(rule["rule"], str(rule.get("messageExpression") or ""))
        if isinstance(compiled, str):
            causes.append({"reason": "FieldValueInvalid", "field": f"{path}.{VALIDATIONS}[{index}].rule",
                           "message": f"Invalid value: {json.dumps(rule['rule'])}: compilation failed: {compiled}"})
    for key, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            causes.extend(compile_causes(sub, f"{path}.properties[{key}]"))
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            causes.extend(compile_causes(schema[key], f"{path}.{key}"))
    return causes
