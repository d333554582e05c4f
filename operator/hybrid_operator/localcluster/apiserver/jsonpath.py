"""The JSONPath subset CRD printer columns use (``additionalPrinterColumns[].jsonPath``).

kube-apiserver evaluates each custom-resource column with client-go's
JSONPath; CRDs in the wild use fields, quoted keys, indexes, wildcards and
equality filters on lists of conditions (``.status.conditions[?(@.type=="Ready")].status``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from hybrid_operator.localcluster import objects

_SEGMENT = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-$]+)
      | \[\s*(?P<index>-?\d+|\*)\s*\]
      | \[\s*(?P<quote>['"])(?P<key>.*?)(?P=quote)\s*\]
      | \[\?\(\s*@(?P<filter_path>(?:\.[A-Za-z0-9_\-]+)+)\s*(?P<op>==|!=)\s*(?P<literal>[^)]*?)\s*\)\]
      | \.\*
    """,
    re.VERBOSE,
)


def _filter_value(literal: str) -> Any:
    literal = literal.strip()
    if len(literal) >= 2 and literal[0] == literal[-1] and literal[0] in "'\"":
        return literal[1:-1]
    try:
        return json.loads(literal)
    except ValueError:
        return literal


def _step(values: list[Any], match: re.Match[str]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        out.extend(_apply_segment(value, match))
    return out


def _apply_segment(value: Any, match: re.Match[str]) -> list[Any]:
    groups = match.groupdict()
    if groups["field"] is not None or groups["key"] is not None:
        key = groups["field"] if groups["field"] is not None else groups["key"]
        return [value[key]] if isinstance(value, dict) and key in value else []
    if groups["index"] is not None:
        return _apply_index(value, groups["index"])
    if groups["filter_path"] is not None:
        return _apply_filter(value, groups["filter_path"], groups["op"], _filter_value(groups["literal"]))
    if isinstance(value, dict):
        return list(value.values())
    return list(value) if isinstance(value, list) else []


def _apply_index(value: Any, index: str) -> list[Any]:
    if not isinstance(value, list):
        return []
    if index == "*":
        return list(value)
    position = int(index)
    return [value[position]] if -len(value) <= position < len(value) else []


def _apply_filter(value: Any, path: str, op: str, expected: Any) -> list[Any]:
    if not isinstance(value, list):
        return []
    keys = path.strip(".").split(".")
    selected = []
    for item in value:
        actual = objects.dig(item, *keys)
        if (actual == expected) == (op == "=="):
            selected.append(item)
    return selected


def jsonpath(obj: Any, expression: str) -> list[Any]:
    """Evaluate the JSONPath subset CRD printer columns use; an empty list when nothing matches.

    Supports ``.field``, ``['field']``, ``[0]``, ``[*]``, ``.*`` and filters
    ``[?(@.type=="Ready")]``; surrounding ``{}`` are allowed.
    """
    text = expression.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    text = text.removeprefix("$")
    values: list[Any] = [obj]
    position = 0
    while position < len(text):
        match = _SEGMENT.match(text, position)
        if match is None:
            return []
        values = _step(values, match)
        position = match.end()
    return values
