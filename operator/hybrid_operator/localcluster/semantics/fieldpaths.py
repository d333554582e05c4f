"""FieldsV1: an object's fields as a set of paths, the currency of managedFields and apply.

kube-apiserver (structured-merge-diff) describes which fields a manager owns
as a set of paths, encoded as FieldsV1: ``{"f:data":{"f:a":{}}}``; list-map
items are named by their keys (``k:{"name":"x"}``), set items by their value
(``v:"x"``); other lists are atomic, one leaf.  This module turns objects into
such sets (:func:`field_set`), encodes and decodes FieldsV1, and reads,
compares and removes the value at a path, list-type aware through
:mod:`.mergekeys`.

Never part of a set: ``apiVersion``, ``kind`` and ``metadata.{name, namespace,
managedFields, resourceVersion, uid, creationTimestamp, generation, selfLink,
deletionTimestamp, deletionGracePeriodSeconds}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from hybrid_operator.localcluster.semantics.mergekeys import ListInfo, Path, list_info, map_is_atomic
from hybrid_operator.localcluster.semantics.patching import json_equal

FieldPath = tuple[str, ...]
"""One field as FieldsV1 path elements, e.g. ``("f:spec", 'k:{"name":"web"}', "f:image")``."""

_MISSING: Any = object()
_IGNORED_TOP = frozenset({"apiVersion", "kind"})
IGNORED_META = frozenset(
    {
        "name",
        "namespace",
        "managedFields",
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)


def path_string(path: FieldPath) -> str:
    """``.spec.containers[name="web"].image``, as conflicts name a field."""
    out: list[str] = []
    for element in path:
        prefix, _, rest = element.partition(":")
        if prefix == "f":
            out.append(f".{rest}")
        elif prefix == "k":
            keys = _parse_json(rest)
            if isinstance(keys, dict):
                out.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]")
            else:
                out.append(f"[{rest}]")
        elif prefix == "v":
            out.append(f"[={rest}]")
        else:
            out.append(f"[{rest}]")
    return "".join(out)


# --------------------------------------------------------------------------- field sets


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _MISSING


def _ignored(norm: Path) -> bool:
    if len(norm) == 1:
        return norm[0] in _IGNORED_TOP
    return len(norm) == 2 and norm[0] == "metadata" and norm[1] in IGNORED_META


def _item_element(item: Any, info: ListInfo) -> str | None:
    """The path element naming ``item`` in a map or set list, or ``None`` if it cannot be keyed."""
    if info.list_type == "map":
        if not isinstance(item, dict):
            return None
        key = {k: item.get(k, info.key_defaults.get(k)) for k in info.map_keys}
        key = {k: v for k, v in key.items() if v is not None}
        return f"k:{_dump(key)}" if key else None
    if info.list_type == "set" and not isinstance(item, dict | list):
        return f"v:{_dump(item)}"
    return None


def item_elements(items: list[Any], info: ListInfo) -> list[str] | None:
    """Elements of every item, or ``None`` when the list must be treated as atomic."""
    elements = [_item_element(item, info) for item in items]
    keyed = [e for e in elements if e is not None]
    if len(keyed) != len(items) or len(set(keyed)) != len(keyed):
        return None
    return keyed


def _collect(value: Any, norm: Path, path: FieldPath, kind: str, out: set[FieldPath]) -> None:
    if isinstance(value, dict):
        if path and (not value or map_is_atomic(kind, norm)):
            out.add(path)
        else:
            _collect_children(value, norm, path, kind, out)
    elif isinstance(value, list):
        info = list_info(kind, norm)
        elements = item_elements(value, info) if value else None
        if elements is None:
            out.add(path)
            return
        for item, element in zip(value, elements, strict=True):
            out.add((*path, element))
            if info.list_type == "map":
                _collect_children(item, norm, (*path, element), kind, out)
    elif path:
        out.add(path)


def _collect_children(
    value: dict[str, Any], norm: Path, path: FieldPath, kind: str, out: set[FieldPath]
) -> None:
    for key, child in value.items():
        sub = (*norm, key)
        if not _ignored(sub):
            _collect(child, sub, (*path, f"f:{key}"), kind, out)


def field_set(obj: Mapping[str, Any], kind: str) -> set[FieldPath]:
    """Every field of ``obj`` as a path, leaves and list items (see :func:`fields_of`)."""
    out: set[FieldPath] = set()
    _collect_children(dict(obj), (), (), kind, out)
    return out


def fields_v1(paths: Iterable[FieldPath]) -> dict[str, Any]:
    """Encode a set of paths as FieldsV1 (``"."`` marks a member that also has children)."""
    root: dict[str, Any] = {}
    members = set(paths)
    for path in sorted(members):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    for path in members:
        node = root
        for element in path:
            node = node[element]
        if node and "." not in node:
            node["."] = {}
    return _sorted_tree(root)


def _sorted_tree(node: dict[str, Any]) -> dict[str, Any]:
    return {k: _sorted_tree(node[k]) for k in sorted(node)}


def _canonical(element: str) -> str:
    prefix, _, rest = element.partition(":")
    if prefix in ("k", "v"):
        value = _parse_json(rest)
        if value is not _MISSING:
            return f"{prefix}:{_dump(value)}"
    return element


def field_paths(fields: Any, prefix: FieldPath = ()) -> set[FieldPath]:
    """Decode FieldsV1 into a set of paths (the inverse of :func:`fields_v1`)."""
    out: set[FieldPath] = set()
    if not isinstance(fields, dict):
        return out
    for element, child in fields.items():
        if element == ".":
            if prefix:
                out.add(prefix)
            continue
        path = (*prefix, _canonical(element))
        if isinstance(child, dict) and child:
            out |= field_paths(child, path)
        else:
            out.add(path)
    return out


def fields_of(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The FieldsV1 field set of ``obj``, ignoring the fields the server never tracks."""
    return fields_v1(field_set(obj, kind))


# --------------------------------------------------------------------------- navigating objects


def _step(node: Any, norm: Path, element: str, kind: str) -> tuple[Any, Path]:
    prefix, _, rest = element.partition(":")
    if prefix == "f":
        if isinstance(node, dict) and rest in node:
            return node[rest], (*norm, rest)
        return _MISSING, norm
    if prefix in ("k", "v") and isinstance(node, list):
        info = list_info(kind, norm)
        for item in node:
            if _item_element(item, info) == element:
                return item, norm
    return _MISSING, norm


def value_at(obj: Any, path: FieldPath, kind: str) -> Any:
    """The value at ``path`` in ``obj``, or a private sentinel when absent (see :func:`has_path`)."""
    node: Any = obj
    norm: Path = ()
    for element in path:
        node, norm = _step(node, norm, element, kind)
        if node is _MISSING:
            break
    return node


def has_path(obj: Any, path: FieldPath, kind: str) -> bool:
    return value_at(obj, path, kind) is not _MISSING


def remove_path(obj: Any, path: FieldPath, kind: str) -> None:
    """Delete the field or list item at ``path`` from ``obj`` in place (no-op when absent)."""
    parent: Any = obj
    norm: Path = ()
    for element in path[:-1]:
        parent, norm = _step(parent, norm, element, kind)
        if parent is _MISSING:
            return
    last = path[-1]
    prefix, _, rest = last.partition(":")
    if prefix == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif isinstance(parent, list):
        info = list_info(kind, norm)
        parent[:] = [item for item in parent if _item_element(item, info) != last]


def differs(old: Any, new: Any, path: FieldPath, kind: str) -> bool:
    """Whether ``path`` (a member of ``new``'s field set) has another value, or is absent, in ``old``."""
    before = value_at(old, path, kind)
    if before is _MISSING:
        return True
    if path[-1].startswith(("k:", "v:")):
        return False
    return not json_equal(before, value_at(new, path, kind))
