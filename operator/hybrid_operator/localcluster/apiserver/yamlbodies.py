"""YAML request bodies, decoded to the JSON values kube-apiserver would see, with aliases bounded.

kube-apiserver turns a YAML body into JSON (``sigs.k8s.io/yaml``) before
decoding it, so timestamps stay strings, keys become strings and NaN or
infinity cannot appear.  PyYAML would also happily build a "billion laughs"
document: a few kilobytes of nested anchors whose aliases expand to millions
of nodes (the graph is shared in memory, but storing it as JSON expands it).
So the composer counts as it goes, before anything is constructed: more than
:data:`MAX_ALIASES` aliases, a recursive alias, or aliases that would make the
document larger than :data:`MAX_EXPANDED_NODES` (or twice its literal size,
whichever is larger) stop the decoding with :class:`ExcessiveAliasing`.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

MAX_ALIASES = 100
MAX_EXPANDED_NODES = 100_000


class ExcessiveAliasing(yaml.YAMLError):
    """The document uses too many aliases, or aliases that expand too far."""


class BodyLoader(yaml.SafeLoader):
    """``SafeLoader`` that bounds alias expansion while composing and builds JSON-compatible values."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._literal = 0
        self._sizes: dict[int, int] = {}  # id(node) -> nodes it stands for once aliases are expanded

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise ExcessiveAliasing(f"yaml: document contains excessive aliasing (more than {MAX_ALIASES} "
                                        "aliases)")
            node = super().compose_node(parent, index)
            if id(node) not in self._sizes:
                raise ExcessiveAliasing("yaml: document contains a recursive alias")
            return node
        node = super().compose_node(parent, index)
        if node is None:
            return None
        self._literal += 1
        size = 1 + sum(self._sizes.get(id(child), 1) for child in _children(node))
        if size > max(MAX_EXPANDED_NODES, 2 * self._literal):
            raise ExcessiveAliasing("yaml: document contains excessive aliasing (its aliases expand to more than "
                                    f"{max(MAX_EXPANDED_NODES, 2 * self._literal)} nodes)")
        self._sizes[id(node)] = size
        return node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def _as_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    """Timestamps and ``!!binary`` stay the text they were written as (JSON has neither)."""
    return str(loader.construct_scalar(node))  # type: ignore[arg-type]


BodyLoader.add_constructor("tag:yaml.org,2002:timestamp", _as_text)
BodyLoader.add_constructor("tag:yaml.org,2002:binary", _as_text)


def load(text: str) -> Any:
    """The JSON value of one YAML document; raises ``yaml.YAMLError`` (or :class:`ExcessiveAliasing`)."""
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
