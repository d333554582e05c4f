"""CRD structural schemas: pruning, defaulting and validation with kube-apiserver's wording."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hybrid_operator.localcluster.errors import invalid
from hybrid_operator.localcluster.semantics.schema import (
    apply_defaults,
    go_value,
    prepare,
    prune,
    unknown_fields,
    validate,
)

pytestmark = pytest.mark.unit

DATABASE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["engine"],
            "properties": {
                "engine": {"type": "string", "enum": ["mysql", "postgres"]},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 5, "default": 1},
                "version": {"type": "string", "maxLength": 5, "minLength": 2, "pattern": "^[0-9.]+$"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "users": {
                    "type": "array",
                    "maxItems": 2,
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "role": {"type": "string", "default": "reader"},
                        },
                    },
                },
                "port": {"x-kubernetes-int-or-string": True},
                "ratio": {"type": "number", "exclusiveMaximum": True, "maximum": 1},
                "backup": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "enabled": {"type": "boolean", "default": True},
                        "schedule": {"type": "string", "default": "@daily"},
                    },
                },
                "note": {"type": "string", "nullable": True},
                "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def _db(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Database",
        "metadata": {"name": "db1", "namespace": "default", "labels": {"a": "b"}},
        "spec": spec,
    }
    obj.update(extra)
    return obj


# --------------------------------------------------------------------------- pruning

PRUNE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    (
        "unknown spec field dropped",
        _db({"engine": "mysql", "colour": "red"}),
        _db({"engine": "mysql"}),
        ["spec.colour"],
    ),
    (
        "unknown root field dropped, type meta and metadata kept",
        _db({"engine": "mysql"}, extra={"x": 1}),
        _db({"engine": "mysql"}),
        ["extra"],
    ),
    (
        "preserve-unknown status kept entirely",
        _db({"engine": "mysql"}, status={"phase": "Ready", "kopf": {"progress": {"h": 1}}}),
        _db({"engine": "mysql"}, status={"phase": "Ready", "kopf": {"progress": {"h": 1}}}),
        [],
    ),
    (
        "unknown field inside array items dropped",
        _db({"engine": "mysql", "users": [{"name": "a", "pw": "x"}, {"name": "b"}]}),
        _db({"engine": "mysql", "users": [{"name": "a"}, {"name": "b"}]}),
        ["spec.users[0].pw"],
    ),
    (
        "additionalProperties map keeps every key",
        _db({"engine": "mysql", "labels": {"team": "x", "env": "prod"}}),
        _db({"engine": "mysql", "labels": {"team": "x", "env": "prod"}}),
        [],
    ),
    (
        "preserve-unknown nested object kept",
        _db({"engine": "mysql", "config": {"anything": {"deep": [1, 2]}}}),
        _db({"engine": "mysql", "config": {"anything": {"deep": [1, 2]}}}),
        [],
    ),
    (
        "non-nullable null without default dropped, nullable null kept",
        _db({"engine": "mysql", "version": None, "note": None}),
        _db({"engine": "mysql", "note": None}),
        [],
    ),
    (
        "non-nullable null with default kept for defaulting",
        _db({"engine": "mysql", "replicas": None}),
        _db({"engine": "mysql", "replicas": None}),
        [],
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected", "dropped"),
    [case[1:] for case in PRUNE_CASES],
    ids=[case[0] for case in PRUNE_CASES],
)
def test_prune(obj: dict[str, Any], expected: dict[str, Any], dropped: list[str]) -> None:
    before = copy.deepcopy(obj)
    assert prune(obj, DATABASE_SCHEMA) == expected
    assert unknown_fields(obj, DATABASE_SCHEMA) == dropped
    assert obj == before, "prune must not mutate its input"


def test_prune_object_without_properties_empties_it() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object"}}}
    assert prune({"spec": {"a": 1}}, schema) == {"spec": {}}
    assert unknown_fields({"spec": {"a": 1}}, schema) == ["spec.a"]


def test_prune_embedded_resource_keeps_type_meta() -> None:
    schema = {
        "type": "object",
        "properties": {
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}},
            }
        },
    }
    meta = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    obj = {"template": {**meta, "spec": {"a": "1", "b": 2}}}
    assert prune(obj, schema) == {"template": {**meta, "spec": {"a": "1"}}}


# --------------------------------------------------------------------------- defaulting

DEFAULT_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "absent scalar and object defaults, nested defaults inside a defaulted object",
        {"engine": "mysql"},
        {"engine": "mysql", "replicas": 1, "backup": {"enabled": True, "schedule": "@daily"}},
    ),
    (
        "given values are kept, missing nested ones filled",
        {"engine": "mysql", "replicas": 3, "backup": {"enabled": False}},
        {"engine": "mysql", "replicas": 3, "backup": {"enabled": False, "schedule": "@daily"}},
    ),
    (
        "defaults inside array items",
        {"engine": "mysql", "users": [{"name": "a"}, {"name": "b", "role": "admin"}]},
        {
            "engine": "mysql",
            "replicas": 1,
            "backup": {"enabled": True, "schedule": "@daily"},
            "users": [{"name": "a", "role": "reader"}, {"name": "b", "role": "admin"}],
        },
    ),
    (
        "null of a non-nullable defaulted field is defaulted",
        {"engine": "mysql", "replicas": None},
        {"engine": "mysql", "replicas": 1, "backup": {"enabled": True, "schedule": "@daily"}},
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [case[1:] for case in DEFAULT_CASES],
    ids=[case[0] for case in DEFAULT_CASES],
)
def test_apply_defaults(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    obj = _db(spec)
    before = copy.deepcopy(obj)
    result = apply_defaults(obj, DATABASE_SCHEMA)
    assert result["spec"] == expected
    assert result["metadata"] == obj["metadata"]
    assert obj == before, "apply_defaults must not mutate its input"


def test_defaults_in_additional_properties_values() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"size": {"type": "integer", "default": 2}},
                },
            }
        },
    }
    assert apply_defaults({"spec": {"a": {}, "b": {"size": 5}}}, schema) == {
        "spec": {"a": {"size": 2}, "b": {"size": 5}}
    }


# --------------------------------------------------------------------------- validation

VALIDATE_CASES: list[tuple[str, dict[str, Any], list[dict[str, str]]]] = [
    ("valid object", {"engine": "postgres", "replicas": 5, "port": "http"}, []),
    ("whole float is an integer", {"engine": "mysql", "replicas": 2.0}, []),
    ("int-or-string accepts ints", {"engine": "mysql", "port": 5432}, []),
    ("nullable accepts null", {"engine": "mysql", "note": None}, []),
    ("number accepts ints", {"engine": "mysql", "ratio": 0}, []),
    (
        "enum and maximum",
        {"engine": "oracle", "replicas": 9},
        [
            {
                "reason": "FieldValueNotSupported",
                "field": "spec.engine",
                "message": 'Unsupported value: "oracle": supported values: "mysql", "postgres"',
            },
            {
                "reason": "FieldValueInvalid",
                "field": "spec.replicas",
                "message": "Invalid value: 9: spec.replicas in body should be less than or equal to 5",
            },
        ],
    ),
    (
        "minimum",
        {"engine": "mysql", "replicas": 0},
        [
            {
                "reason": "FieldValueInvalid",
                "field": "spec.replicas",
                "message": "Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            }
        ],
    ),
    (
        "type string for integer",
        {"engine": "mysql", "replicas": "string"},
        [
            {
                "reason": "FieldValueTypeInvalid",
                "field": "spec.replicas",
                "message": 'Invalid value: "string": spec.replicas in body must be of type integer: "string"',
            }
        ],
    ),
    (
        "fractional number for integer",
        {"engine": "mysql", "replicas": 2.5},
        [
            {
                "reason": "FieldValueTypeInvalid",
                "field": "spec.replicas",
                "message": 'Invalid value: "number": spec.replicas in body must be of type integer: "number"',
            }
        ],
    ),
    (
        "bool is not an integer",
        {"engine": "mysql", "replicas": True},
        [
            {
                "reason": "FieldValueTypeInvalid",
                "field": "spec.replicas",
                "message": (
                    'Invalid value: "boolean": spec.replicas in body must be of type integer: "boolean"'
                ),
            }
        ],
    ),
    (
        "required",
        {"replicas": 2},
        [{"reason": "FieldValueRequired", "field": "spec.engine", "message": "Required value"}],
    ),
    (
        "maxLength",
        {"engine": "mysql", "version": "1.2.3.4"},
        [
            {
                "reason": "FieldValueTooLong",
                "field": "spec.version",
                "message": "Too long: may not be more than 5 bytes",
            }
        ],
    ),
    (
        "minLength and pattern",
        {"engine": "mysql", "version": "x"},
        [
            {
                "reason": "FieldValueInvalid",
                "field": "spec.version",
                "message": 'Invalid value: "x": spec.version in body should be at least 2 chars long',
            },
            {
                "reason": "FieldValueInvalid",
                "field": "spec.version",
                "message": "Invalid value: \"x\": spec.version in body should match '^[0-9.]+$'",
            },
        ],
    ),
    (
        "maxItems",
        {"engine": "mysql", "users": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
        [
            {
                "reason": "FieldValueTooMany",
                "field": "spec.users",
                "message": "Too many: 3: must have at most 2 items",
            }
        ],
    ),
    (
        "minItems",
        {"engine": "mysql", "users": []},
        [
            {
                "reason": "FieldValueInvalid",
                "field": "spec.users",
                "message": "Invalid value: 0: spec.users in body should have at least 1 items",
            }
        ],
    ),
    (
        "required inside array items",
        {"engine": "mysql", "users": [{"role": "x"}]},
        [{"reason": "FieldValueRequired", "field": "spec.users[0].name", "message": "Required value"}],
    ),
    (
        "additionalProperties value type",
        {"engine": "mysql", "labels": {"team": 5}},
        [
            {
                "reason": "FieldValueTypeInvalid",
                "field": "spec.labels.team",
                "message": (
                    'Invalid value: "integer": spec.labels.team in body must be of type string: "integer"'
                ),
            }
        ],
    ),
    (
        "int-or-string rejects bools",
        {"engine": "mysql", "port": False},
        [
            {
                "reason": "FieldValueTypeInvalid",
                "field": "spec.port",
                "message": (
                    'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"'
                ),
            }
        ],
    ),
    (
        "exclusive maximum",
        {"engine": "mysql", "ratio": 1},
        [
            {
                "reason": "FieldValueInvalid",
                "field": "spec.ratio",
                "message": "Invalid value: 1: spec.ratio in body should be less than 1",
            }
        ],
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [case[1:] for case in VALIDATE_CASES],
    ids=[case[0] for case in VALIDATE_CASES],
)
def test_validate(spec: dict[str, Any], expected: list[dict[str, str]]) -> None:
    assert validate(_db(spec), DATABASE_SCHEMA) == expected


def test_validate_missing_required_spec_at_root() -> None:
    schema = {"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object"}}}
    assert validate({"apiVersion": "v1", "kind": "X", "metadata": {}}, schema) == [
        {"reason": "FieldValueRequired", "field": "spec", "message": "Required value"}
    ]


def test_validate_skips_metadata_but_checks_name_constraint() -> None:
    schema = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}},
        },
    }
    assert validate({"metadata": {"name": "abc", "labels": {"x": "y"}}}, schema) == []
    causes = validate({"metadata": {"name": "abcd"}}, schema)
    assert [c["field"] for c in causes] == ["metadata.name"]


def test_validate_null_for_non_nullable_in_array() -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string"}}}}
    assert validate({"xs": ["a", None]}, schema) == [
        {
            "reason": "FieldValueTypeInvalid",
            "field": "xs[1]",
            "message": 'Invalid value: "null": xs[1] in body must be of type string: "null"',
        }
    ]


COMPOSITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "any": {"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]},
        "one": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
        "all": {"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 3}]},
        "not": {"type": "string", "not": {"enum": ["forbidden"]}},
    },
}

COMPOSITION_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("all pass", {"any": 11, "one": "ax", "all": 2, "not": "ok"}, []),
    ("anyOf fails", {"any": 5}, ['"any" must validate at least one schema (anyOf)']),
    ("oneOf none", {"one": "xx"}, ['"one" must validate one and only one schema (oneOf). Found none valid']),
    ("oneOf both", {"one": "ab"}, ['"one" must validate one and only one schema (oneOf). Found 2 valid']),
    ("allOf fails", {"all": 7}, ["must validate all the schemas (allOf)"]),
    ("not fails", {"not": "forbidden"}, ['"not" must not validate the schema (not)']),
]


@pytest.mark.parametrize(
    ("obj", "fragments"),
    [case[1:] for case in COMPOSITION_CASES],
    ids=[case[0] for case in COMPOSITION_CASES],
)
def test_composition(obj: dict[str, Any], fragments: list[str]) -> None:
    causes = validate(obj, COMPOSITION_SCHEMA)
    messages = " | ".join(c["message"] for c in causes)
    if not fragments:
        assert causes == []
    for fragment in fragments:
        assert fragment in messages
    assert all(c["reason"] == "FieldValueInvalid" for c in causes)


# --------------------------------------------------------------------------- pipeline and helpers


def test_prepare_prunes_defaults_then_validates() -> None:
    obj = _db({"engine": "oracle", "replicas": 9, "colour": "red"}, status={"anything": 1})
    result, causes = prepare(obj, DATABASE_SCHEMA)
    assert "colour" not in result["spec"]
    assert result["spec"]["backup"] == {"enabled": True, "schedule": "@daily"}
    assert result["status"] == {"anything": 1}
    assert [c["field"] for c in causes] == ["spec.engine", "spec.replicas"]
    error = invalid("Database", "example.com", "db1", causes)
    assert error.code == 422
    assert error.message.startswith('Database.example.com "db1" is invalid: [spec.engine: Unsupported value')


def test_prepare_defaults_satisfy_validation() -> None:
    result, causes = prepare(_db({"engine": "mysql"}), DATABASE_SCHEMA)
    assert causes == []
    assert result["spec"]["replicas"] == 1


@pytest.mark.parametrize(
    ("value", "rendered"),
    [("a", '"a"'), (9, "9"), (2.0, "2"), (2.5, "2.5"), (True, "true"), (None, "null"), ({"a": 1}, '{"a":1}')],
)
def test_go_value(value: Any, rendered: str) -> None:
    assert go_value(value) == rendered
