"""Unit tests for hybrid_operator.helm_values: spec + overrideValues, typed strvals paths, masking, digests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hybrid_operator.helm import values as helm_values

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("path", "segments"), [
    ("image", ["image"]),
    ("image.tag", ["image", "tag"]),
    ("hosts[0]", ["hosts", 0]),
    ("hosts[2].name", ["hosts", 2, "name"]),
    ("matrix[1][0]", ["matrix", 1, 0]),
    (r"annotations.example\.com/team", ["annotations", "example.com/team"]),
    (r"a\\b", ["a\\b"]),
])
def test_parse_path(path: str, segments: list[Any]) -> None:
    assert helm_values.parse_path(path) == segments


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a.", "a[x]", "[0]", "a[0]b", "a[65537]"])
def test_parse_path_rejects(path: str) -> None:
    with pytest.raises(helm_values.ValuePathError):
        helm_values.parse_path(path)


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("TRUE", True), ("False", False), ("null", None), ("0", 0), ("42", 42), ("-7", -7),
    ("007", "007"), ("1.5", "1.5"), ("", ""), ("yes", "yes"), ("1e3", "1e3"),
    ("9223372036854775807", 9223372036854775807), ("9223372036854775808", "9223372036854775808"),
    ("a,b=c", "a,b=c"),
])
def test_typed_value_follows_strvals(text: str, value: Any) -> None:
    converted = helm_values.typed_value(text)
    assert converted == value and type(converted) is type(value)


def test_compose_overrides_win_and_spec_is_untouched() -> None:
    spec = {"size": 3, "image": {"repository": "memcached", "tag": "1.6"}, "hosts": [{"name": "a"}, {"name": "b"}]}
    original = copy.deepcopy(spec)
    composed = helm_values.compose(spec, {"image.tag": "1.7", "replicas": "2", "hosts[1].port": "11211",
                                          "debug": "true", "extra[2]": "x"})
    assert composed.values == {
        "size": 3,
        "image": {"repository": "memcached", "tag": "1.7"},
        "hosts": [{"name": "a"}, {"name": "b", "port": 11211}],
        "replicas": 2,
        "debug": True,
        "extra": [None, None, "x"],
    }
    assert spec == original
    assert [(o.path, o.value, o.replaced_spec_value) for o in composed.overrides] == [
        ("image.tag", "1.7", True), ("replicas", 2, False), ("hosts[1].port", 11211, False),
        ("debug", True, False), ("extra[2]", "x", False),
    ]


@pytest.mark.parametrize(("spec", "overrides", "expected"), [
    (None, {}, {}),
    ({}, {"a.b": "1"}, {"a": {"b": 1}}),
    ({"a": "scalar"}, {"a.b": "x"}, {"a": {"b": "x"}}),        # a scalar in the way becomes a map
    ({"a": {"b": 1}}, {"a[0]": "x"}, {"a": ["x"]}),             # a map in the way becomes a list
    ({"a": {"b": 1, "c": 2}}, {"a.c": "null"}, {"a": {"b": 1, "c": None}}),
    ({"x": 1}, {"x": ""}, {"x": ""}),                           # an unset $VAR still overrides
])
def test_compose_table(spec: dict[str, Any] | None, overrides: dict[str, str], expected: dict[str, Any]) -> None:
    assert helm_values.compose(spec, overrides).values == expected


@pytest.mark.parametrize(("suppress", "message"), [
    (False, 'Chart value "image.tag" overridden to "1.7" by operator\'s watches.yaml'),
    (True, 'Chart value "image.tag" overridden to "****" by operator\'s watches.yaml'),
])
def test_override_message_masks_when_suppressed(suppress: bool, message: str) -> None:
    override = helm_values.compose({}, {"image.tag": "1.7"}).overrides[0]
    assert helm_values.override_message(override, suppress) == message


def test_override_message_shows_typed_values_as_written() -> None:
    overrides = helm_values.compose({}, {"a": "true", "b": "null", "c": "3"}).overrides
    texts = [helm_values.override_message(o, False) for o in overrides]
    assert ['"true"' in texts[0], '"null"' in texts[1], '"3"' in texts[2]] == [True, True, True]


def test_inputs_digest_changes_with_values_or_chart_only() -> None:
    base = helm_values.inputs_digest("chart-a", {"size": 1, "image": {"tag": "x"}})
    assert base == helm_values.inputs_digest("chart-a", {"image": {"tag": "x"}, "size": 1})  # key order is irrelevant
    assert base != helm_values.inputs_digest("chart-a", {"size": 2, "image": {"tag": "x"}})
    assert base != helm_values.inputs_digest("chart-b", {"size": 1, "image": {"tag": "x"}})
    assert len(base) == 40 and all(c in "0123456789abcdef" for c in base)
