"""The three PATCH bodies kube-apiserver accepts besides apply, as pure functions.

``merge_patch`` is RFC 7386 (``application/merge-patch+json``), ``json_patch`` is
RFC 6902 (``application/json-patch+json``) and ``strategic_merge_patch`` is
Kubernetes' strategic merge patch for built-in kinds, driven by the merge keys
in :mod:`.mergekeys`.  Objects are plain JSON values; no input is ever mutated.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hybrid_operator.localcluster.semantics.mergekeys import Path, list_strategy


class PatchError(Exception):
    """A malformed patch document, operation or path (the caller answers 4xx)."""


class PatchTestFailed(PatchError):
    """A JSON patch ``test`` operation did not match (the caller answers 422)."""


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``1 == 1.0`` but ``True != 1``, and order matters only in lists."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


# --------------------------------------------------------------------------- RFC 7386


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch: ``null`` deletes, a non-object patch replaces."""
    return _merge_patch_owned(copy.deepcopy(target), patch)


def _merge_patch_owned(target: Any, patch: Any) -> Any:
    """:func:`merge_patch` on a ``target`` the caller owns (it is reused, not copied)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch_owned(result.get(key), value)
    return result


# --------------------------------------------------------------------------- RFC 6902


def _parse_pointer(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise PatchError(f"JSON pointer must be a string, got {pointer!r}")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f'JSON pointer "{pointer}" must start with "/"')
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _index(token: str, container: list[Any], pointer: str, *, allow_end: bool) -> int:
    if allow_end and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f'invalid array index "{token}" in path "{pointer}"')
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise PatchError(f'array index {index} out of range in path "{pointer}"')
    return index


def _resolve(doc: Any, tokens: list[str], pointer: str) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f'path "{pointer}" does not exist')
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(token, node, pointer, allow_end=False)]
        else:
            raise PatchError(f'path "{pointer}" does not exist')
    return node


def _parent(doc: Any, pointer: str) -> tuple[Any, str]:
    tokens = _parse_pointer(pointer)
    parent = _resolve(doc, tokens[:-1], pointer)
    if not isinstance(parent, dict | list):
        raise PatchError(f'path "{pointer}" does not exist')
    return parent, tokens[-1]


def _add(doc: Any, pointer: str, value: Any) -> Any:
    if _parse_pointer(pointer) == []:
        return value
    parent, token = _parent(doc, pointer)
    if isinstance(parent, dict):
        parent[token] = value
    else:
        parent.insert(_index(token, parent, pointer, allow_end=True), value)
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    """Remove the value at ``pointer``; returns ``(doc, removed value)``."""
    if _parse_pointer(pointer) == []:
        raise PatchError("cannot remove the whole document")
    parent, token = _parent(doc, pointer)
    if isinstance(parent, dict):
        if token not in parent:
            raise PatchError(f'unable to remove nonexistent key "{token}" at path "{pointer}"')
        return doc, parent.pop(token)
    return doc, parent.pop(_index(token, parent, pointer, allow_end=False))


def _operand(op: dict[str, Any], name: str) -> Any:
    if name not in op:
        raise PatchError(f'operation "{op.get("op")}" is missing "{name}"')
    return op[name]


def _apply_op(doc: Any, op: Any) -> Any:
    if not isinstance(op, dict):
        raise PatchError(f"JSON patch operation must be an object, got {op!r}")
    kind = op.get("op")
    path = _operand(op, "path")
    operation = _OPERATIONS.get(kind) if isinstance(kind, str) else None
    if operation is None:
        raise PatchError(f'unknown JSON patch operation "{kind}"')
    return operation(doc, op, path)


def _op_add(doc: Any, op: dict[str, Any], path: str) -> Any:
    return _add(doc, path, copy.deepcopy(_operand(op, "value")))


def _op_remove(doc: Any, op: dict[str, Any], path: str) -> Any:
    return _remove(doc, path)[0]


def _op_replace(doc: Any, op: dict[str, Any], path: str) -> Any:
    _resolve(doc, _parse_pointer(path), path)
    if _parse_pointer(path) == []:
        return copy.deepcopy(_operand(op, "value"))
    doc, _ = _remove(doc, path)
    return _add(doc, path, copy.deepcopy(_operand(op, "value")))


def _op_move(doc: Any, op: dict[str, Any], path: str) -> Any:
    source = _operand(op, "from")
    if path != source and path.startswith(source + "/"):
        raise PatchError(f'cannot move "{source}" into its own child "{path}"')
    doc, value = _remove(doc, source)
    return _add(doc, path, value)


def _op_copy(doc: Any, op: dict[str, Any], path: str) -> Any:
    source = _operand(op, "from")
    value = _resolve(doc, _parse_pointer(source), source)
    return _add(doc, path, copy.deepcopy(value))


def _op_test(doc: Any, op: dict[str, Any], path: str) -> Any:
    expected = _operand(op, "value")
    try:
        actual = _resolve(doc, _parse_pointer(path), path)
    except PatchError as err:
        raise PatchTestFailed(f'testing value at "{path}" failed: {err}') from err
    if not json_equal(actual, expected):
        raise PatchTestFailed(f'testing value at "{path}" failed: value is {actual!r}, not {expected!r}')
    return doc


_OPERATIONS: dict[str, Callable[[Any, dict[str, Any], str], Any]] = {
    "add": _op_add,
    "remove": _op_remove,
    "replace": _op_replace,
    "move": _op_move,
    "copy": _op_copy,
    "test": _op_test,
}


def json_patch(target: Any, ops: Any) -> Any:
    """Apply an RFC 6902 JSON patch; raises :class:`PatchTestFailed` or :class:`PatchError`."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        doc = _apply_op(doc, op)
    return doc


# --------------------------------------------------------------------------- strategic merge

_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_ORDER_PREFIX = "$setElementOrder/"
_DELETE_PREFIX = "$deleteFromPrimitiveList/"


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any], kind: str) -> dict[str, Any]:
    """Apply a strategic merge patch to a built-in object of ``kind``.

    Lists with strategy ``merge`` merge by their merge key (maps) or as a set
    (primitives); other lists are replaced.  The directives ``$patch``,
    ``$retainKeys``, ``$setElementOrder/<f>`` and ``$deleteFromPrimitiveList/<f>``
    are honoured and never left in the result.
    """
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    result = _merge_map(target if isinstance(target, dict) else {}, patch, (), kind)
    if result is None:
        raise PatchError('"$patch: delete" cannot delete the whole object')
    return result


def _directive(patch: dict[str, Any]) -> str | None:
    value = patch.get(_PATCH)
    if value is None:
        return None
    if value not in ("replace", "delete", "merge"):
        raise PatchError(f'unknown patch directive "$patch: {value}"')
    return str(value)


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], path: Path, kind: str
) -> dict[str, Any] | None:
    """Merge ``patch`` into ``original``; ``None`` means the map is deleted."""
    directive = _directive(patch)
    if directive == "delete":
        return None
    if directive == "replace":
        cleaned: dict[str, Any] = _clean(patch, path, kind)
        return cleaned
    result = copy.deepcopy(original)
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("$retainKeys must be a list of field names")
        result = {k: v for k, v in result.items() if k in retain}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        _merge_key(result, key, value, path, kind)
    for key, value in patch.items():
        if key.startswith(_DELETE_PREFIX):
            _delete_from_primitive_list(result, key[len(_DELETE_PREFIX) :], value)
    for key, value in patch.items():
        if key.startswith(_ORDER_PREFIX):
            _set_element_order(result, key[len(_ORDER_PREFIX) :], value, path, kind)
    return result


def _merge_key(result: dict[str, Any], key: str, value: Any, path: Path, kind: str) -> None:
    sub = (*path, key)
    current = result.get(key)
    if value is None:
        result.pop(key, None)
    elif isinstance(value, dict):
        merged = _merge_map(current if isinstance(current, dict) else {}, value, sub, kind)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged
    elif isinstance(value, list):
        result[key] = _merge_list(current if isinstance(current, list) else [], value, sub, kind)
    else:
        result[key] = copy.deepcopy(value)


def _clean(value: Any, path: Path, kind: str) -> Any:
    """A patch value applied to nothing: directives and ``null`` fields dropped."""
    if isinstance(value, dict):
        merged = _merge_map({}, {k: v for k, v in value.items() if k != _PATCH}, path, kind)
        return merged if merged is not None else {}
    if isinstance(value, list):
        return [_clean(item, path, kind) for item in value if not _is_directive_item(item)]
    return copy.deepcopy(value)


def _is_directive_item(item: Any) -> bool:
    return isinstance(item, dict) and set(item) == {_PATCH}


def _merge_list(original: list[Any], patch: list[Any], path: Path, kind: str) -> list[Any]:
    strategy, merge_key, _ = list_strategy(kind, path)
    replace = any(_is_directive_item(item) and item[_PATCH] == "replace" for item in patch)
    if replace or strategy != "merge":
        return [_clean(item, path, kind) for item in patch if not _is_directive_item(item)]
    if merge_key is None:
        return _merge_primitive_list(original, patch)
    return _merge_keyed_list(original, patch, path, kind, merge_key)


def _merge_primitive_list(original: list[Any], patch: list[Any]) -> list[Any]:
    result = copy.deepcopy(original)
    for item in patch:
        if isinstance(item, dict):
            raise PatchError("a list merged as a set cannot contain objects")
        if not any(json_equal(item, existing) for existing in result):
            result.append(item)
    return result


def _merge_keyed_list(
    original: list[Any], patch: list[Any], path: Path, kind: str, merge_key: str
) -> list[Any]:
    result = copy.deepcopy(original)
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"list items at {'.'.join(path)} must be objects with merge key {merge_key!r}")
        if _is_directive_item(item):
            continue
        if merge_key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {merge_key}")
        position = _find(result, merge_key, item[merge_key])
        if _directive(item) == "delete":
            result = [e for e in result if not _has_key(e, merge_key, item[merge_key])]
            continue
        base = result[position] if position is not None else {}
        merged = _merge_map(base if isinstance(base, dict) else {}, item, path, kind)
        if merged is None:
            continue
        if position is None:
            result.append(merged)
        else:
            result[position] = merged
    return result


def _has_key(element: Any, merge_key: str, value: Any) -> bool:
    return isinstance(element, dict) and merge_key in element and json_equal(element[merge_key], value)


def _find(items: list[Any], merge_key: str, value: Any) -> int | None:
    for position, element in enumerate(items):
        if _has_key(element, merge_key, value):
            return position
    return None


def _delete_from_primitive_list(result: dict[str, Any], field: str, values: Any) -> None:
    if not isinstance(values, list):
        raise PatchError(f"{_DELETE_PREFIX}{field} must be a list")
    current = result.get(field)
    if isinstance(current, list):
        result[field] = [item for item in current if not any(json_equal(item, v) for v in values)]


def _set_element_order(result: dict[str, Any], field: str, order: Any, path: Path, kind: str) -> None:
    """Reorder ``result[field]`` as listed; items not listed keep their order after those listed."""
    if not isinstance(order, list):
        raise PatchError(f"{_ORDER_PREFIX}{field} must be a list")
    current = result.get(field)
    if not isinstance(current, list):
        return
    _, merge_key, _ = list_strategy(kind, (*path, field))

    def identity(item: Any) -> Any:
        if merge_key is not None and isinstance(item, dict):
            return item.get(merge_key)
        return item

    wanted = [identity(item) for item in order]
    ranked: list[tuple[int, int, Any]] = []
    for position, item in enumerate(current):
        ident = identity(item)
        rank = next((i for i, w in enumerate(wanted) if json_equal(w, ident)), len(wanted))
        ranked.append((rank, position, item))
    result[field] = [item for _, _, item in sorted(ranked, key=lambda entry: (entry[0], entry[1]))]
