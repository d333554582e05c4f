"""The values a Helm release gets: the CR's ``spec`` with the watch's ``overrideValues`` on top.

Why this module exists: which values reach ``helm install/upgrade`` is part of the compatibility
contract (``compat-helm.md`` §1), and it must be testable without helm.  Overrides are written into
a copy of ``spec`` at their strvals paths (``image.tag``, ``hosts[0].name``, ``a\\.b`` for a key with
a dot) with Helm's typed conversion (``true``/``false`` -> bool, ``null`` -> null, a whole number
without a leading zero -> int, anything else -> string), as helm-operator-plugins does; overrides
always win.  Unlike strvals, a value is never split at commas: one key, one value.

It also answers which keys were overridden (for the ``OverrideValuesInUse`` events, masked with
``--suppress-override-values``) and gives a digest of a release's inputs, so that a resync can tell
"the inputs changed" from "the chart renders differently every time".
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MASK = "****"
MAX_INDEX = 65536
_SEGMENT = re.compile(r"((?:[^.\[\]\\]|\\.)+)((?:\[[0-9]+\])*)")
_INT = re.compile(r"-?[1-9][0-9]*")

PathSegment = str | int


class ValuePathError(ValueError):
    """An override path that strvals would not accept."""


@dataclass(frozen=True)
class Override:
    """One ``overrideValues`` entry as applied: typed value, and whether the spec had a value there."""

    path: str
    value: Any
    replaced_spec_value: bool


@dataclass(frozen=True)
class ComposedValues:
    """The values of one release and the overrides they contain."""

    values: dict[str, Any]
    overrides: tuple[Override, ...]


def parse_path(path: str) -> list[PathSegment]:
    """Split a strvals path into map keys (str) and list indexes (int)."""
    segments: list[PathSegment] = []
    for part in _split_dots(path):
        match = _SEGMENT.fullmatch(part)
        if match is None:
            raise ValuePathError(f"invalid value path {path!r}: {part!r} is not a key optionally followed by [N]")
        segments.append(re.sub(r"\\(.)", r"\1", match.group(1)))
        for index in re.findall(r"\[([0-9]+)\]", match.group(2)):
            if int(index) > MAX_INDEX:
                raise ValuePathError(f"invalid value path {path!r}: index {index} is larger than {MAX_INDEX}")
            segments.append(int(index))
    return segments


def _split_dots(path: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for char in path:
        if escaped:
            current += ["\\", char]
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    if any(not part for part in parts):
        raise ValuePathError(f"invalid value path {path!r}: empty key (two dots, or a leading/trailing dot)")
    return parts


def typed_value(text: str) -> Any:
    """Helm's strvals conversion of a ``--set`` value."""
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    if lowered == "null":
        return None
    if text == "0":
        return 0
    if _INT.fullmatch(text) and -(2**63) <= int(text) < 2**63:
        return int(text)
    return text


def set_path(root: dict[str, Any], segments: list[PathSegment], value: Any) -> bool:
    """Write ``value`` at ``segments`` in ``root`` (creating maps/lists); True if a value was there."""
    node: Any = root
    for position, segment in enumerate(segments[:-1]):
        wanted: type = list if isinstance(segments[position + 1], int) else dict
        child = _get(node, segment)
        if not isinstance(child, wanted):
            child = wanted()
            _put(node, segment, child)
        node = child
    last = segments[-1]
    existed = _get(node, last) is not None
    _put(node, last, value)
    return existed


def _get(node: Any, segment: PathSegment) -> Any:
    if isinstance(segment, int):
        return node[segment] if isinstance(node, list) and segment < len(node) else None
    return node.get(segment) if isinstance(node, dict) else None


def _put(node: Any, segment: PathSegment, value: Any) -> None:
    if isinstance(segment, int):
        node.extend([None] * (segment + 1 - len(node)))
        node[segment] = value
    else:
        node[segment] = value


def compose(spec: Mapping[str, Any] | None, overrides: Mapping[str, str]) -> ComposedValues:
    """``spec`` (not modified) with every override written at its path, in the order given."""
    values: dict[str, Any] = copy.deepcopy(dict(spec)) if isinstance(spec, Mapping) else {}
    applied = []
    for path, text in overrides.items():
        value = typed_value(text)
        replaced = set_path(values, parse_path(path), value)
        applied.append(Override(path, value, replaced))
    return ComposedValues(values, tuple(applied))


def override_message(override: Override, suppress: bool) -> str:
    """The ``OverrideValuesInUse`` event message (the SDK's wording), value masked when asked."""
    shown = MASK if suppress else _display(override.value)
    return f"Chart value {json.dumps(override.path)} overridden to {json.dumps(shown)} by operator's watches.yaml"


def _display(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def inputs_digest(chart_digest: str, values: Mapping[str, Any]) -> str:
    """A short, label-safe digest of what a release is rendered from: chart content and values."""
    document = json.dumps({"chart": chart_digest, "values": values}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(document.encode()).hexdigest()[:40]
