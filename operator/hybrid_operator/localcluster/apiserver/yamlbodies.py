"""YAML request bodies, decoded to the JSON values kube-apiserver would see, with aliases bounded.

kube-apiserver turns a YAML body into JSON (``sigs.k8s.io/yaml``) before
decoding it, so timestamps stay strings, keys become strings and NaN or
infinity cannot appear.  PyYAML would also happily build a "billion laughs"
document: a few kilobytes of nested anchors whose aliases expand to millions
of nodes (the graph is shared in memory, but storing it as JSON expands it).
So the parser's event stream is counted first, before any node is composed:
more than :data:`MAX_ALIASES` aliases, a recursive alias, or aliases that
would make the document larger than :data:`MAX_EXPANDED_NODES` (or twice its
literal size, whichever is larger) stop the decoding with
:class:`ExcessiveAliasing`.  libyaml's parser is used when PyYAML has it (a
3 MiB YAML body takes seconds even so, which is why the HTTP layer decodes large
YAML bodies in a worker process).
"""

from __future__ import annotations

import math
from typing import Any

import yaml

MAX_ALIASES = 100
MAX_EXPANDED_NODES = 100_000


class ExcessiveAliasing(yaml.YAMLError):
    """The document uses too many aliases, or aliases that expand too far."""


_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it


class BodyLoader(_Loader):  # type: ignore[misc,valid-type]
    """The safe loader (libyaml's parser when available) building JSON-compatible values."""


def _as_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    """Timestamps and ``!!binary`` stay the text they were written as (JSON has neither)."""
    return str(loader.construct_scalar(node))  # type: ignore[arg-type]


BodyLoader.add_constructor("tag:yaml.org,2002:timestamp", _as_text)
BodyLoader.add_constructor("tag:yaml.org,2002:binary", _as_text)

_OPENS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSES = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def check_aliases(text: str) -> None:
    """Refuse excessive aliasing from the event stream alone, before any node or value is built.

    Each anchored node's size (nodes, aliases expanded) is known when it closes;
    an alias adds its anchor's size.  An alias to an anchor still open (or never
    defined) is recursive.
    """
    aliases = literal = expanded = 0
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = [[0, None]]  # [size so far, anchor] of each open collection
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise ExcessiveAliasing(f"yaml: document contains excessive aliasing (more than {MAX_ALIASES} "
                                        "aliases)")
            if event.anchor not in sizes:
                raise ExcessiveAliasing("yaml: document contains a recursive or undefined alias")
            stack[-1][0] += sizes[event.anchor]
            expanded += sizes[event.anchor]
            if expanded > max(MAX_EXPANDED_NODES, 2 * literal):
                raise ExcessiveAliasing("yaml: document contains excessive aliasing (its aliases expand to more "
                                        f"than {max(MAX_EXPANDED_NODES, 2 * literal)} nodes)")
        elif isinstance(event, yaml.ScalarEvent):
            literal += 1
            stack[-1][0] += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, _OPENS):
            literal += 1
            stack.append([1, event.anchor])
        elif isinstance(event, _CLOSES) and len(stack) > 1:
            size, anchor = stack.pop()
            stack[-1][0] += size
            if anchor is not None:
                sizes[anchor] = size


def load(text: str) -> Any:
    """The JSON value of one YAML document; raises ``yaml.YAMLError`` (or :class:`ExcessiveAliasing`)."""
    check_aliases(text)
    loader = BodyLoader(text)
    try:
        return _jsonable(loader.get_single_data())
    finally:
        loader.dispose()


def _jsonable(value: Any) -> Any:
    """``value`` with keys as strings and no NaN/infinity, as ``sigs.k8s.io/yaml`` converts YAML to JSON."""
    if isinstance(value, dict):
        return {_key(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise yaml.YAMLError(f"json: unsupported value: {value}")
    if value is None or isinstance(value, str | int | float):
        return value
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    raise yaml.YAMLError(f"yaml: invalid map key: {key!r}")
