"""Server-side apply and ``metadata.managedFields`` bookkeeping, as pure functions.

kube-apiserver records, per field manager, the set of fields it set (FieldsV1:
``{"f:data":{"f:a":{}}}``, list-map items as ``k:{"name":"x"}``, set items as
``v:"x"``).  :func:`apply` merges an applied configuration into the live object
list-type aware, reports conflicts with other managers, and drops fields the
manager no longer applies; :func:`record_update` gives the writer of an ordinary
POST/PUT/PATCH ownership of what it changed.

Never tracked: ``apiVersion``, ``kind`` and ``metadata.{name, namespace,
managedFields, resourceVersion, uid, creationTimestamp, generation, selfLink,
deletionTimestamp, deletionGracePeriodSeconds}``.  ``status`` is tracked like any
field: when status is a subresource, the caller must remove ``status`` from the
applied/new object of a main-resource write (and everything but ``status`` and
metadata for a ``/status`` write) before calling in here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator.localcluster.errors import ApiError
from hybrid_operator.localcluster.semantics.mergekeys import ListInfo, Path, list_info, map_is_atomic
from hybrid_operator.localcluster.semantics.patching import json_equal

FieldPath = tuple[str, ...]
"""One field as FieldsV1 path elements, e.g. ``("f:spec", 'k:{"name":"web"}', "f:image")``."""

_MISSING: Any = object()
_IGNORED_TOP = frozenset({"apiVersion", "kind"})
_IGNORED_META = frozenset(
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
_SERVER_META = _IGNORED_META - {"name", "namespace"}


# --------------------------------------------------------------------------- conflicts


class ApplyConflict(Exception):
    """Applied fields owned by other managers with different values (HTTP 409)."""

    def __init__(self, conflicts: list[tuple[str, str]], api_versions: Mapping[str, str] | None = None):
        self.conflicts = conflicts
        self.api_versions = dict(api_versions or {})
        super().__init__(self.message())

    def _who(self, manager: str) -> str:
        version = self.api_versions.get(manager)
        return f"{json.dumps(manager)} using {version}" if version else json.dumps(manager)

    def message(self) -> str:
        """kube-apiserver's wording: ``Apply failed with 1 conflict: conflict with "m" using v1: .data.a``."""
        if len(self.conflicts) == 1:
            manager, path = self.conflicts[0]
            return f"Apply failed with 1 conflict: conflict with {self._who(manager)}: {path}"
        lines: list[str] = []
        for manager in dict.fromkeys(m for m, _ in self.conflicts):
            lines.append(f"conflicts with {self._who(manager)}:")
            lines.extend(f"- {path}" for m, path in self.conflicts if m == manager)
        return f"Apply failed with {len(self.conflicts)} conflicts: " + "\n".join(lines)

    def causes(self) -> list[dict[str, str]]:
        """``details.causes`` of the 409 Status."""
        return [
            {"reason": "FieldManagerConflict", "message": f"conflict with {self._who(m)}", "field": path}
            for m, path in self.conflicts
        ]

    def api_error(self, plural: str, group: str, name: str) -> ApiError:
        """The 409 Conflict :class:`ApiError` the HTTP layer sends."""
        details: dict[str, Any] = {"name": name, "group": group, "kind": plural, "causes": self.causes()}
        return ApiError(409, "Conflict", self.message(), details)


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
    return len(norm) == 2 and norm[0] == "metadata" and norm[1] in _IGNORED_META


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


def _item_elements(items: list[Any], info: ListInfo) -> list[str] | None:
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
        elements = _item_elements(value, info) if value else None
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


def _remove_path(obj: Any, path: FieldPath, kind: str) -> None:
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


def _differs(old: Any, new: Any, path: FieldPath, kind: str) -> bool:
    """Whether ``path`` (a member of ``new``'s field set) has another value, or is absent, in ``old``."""
    before = value_at(old, path, kind)
    if before is _MISSING:
        return True
    if path[-1].startswith(("k:", "v:")):
        return False
    return not json_equal(before, value_at(new, path, kind))


# --------------------------------------------------------------------------- managedFields entries


@dataclass
class _Entry:
    """One ``managedFields`` entry; ``raw`` is kept verbatim unless the entry is rewritten."""

    raw: dict[str, Any]
    fields: set[FieldPath] = field(default_factory=set)
    dirty: bool = False

    @property
    def ident(self) -> tuple[str, str, str]:
        return (
            str(self.raw.get("manager", "")),
            str(self.raw.get("operation", "")),
            str(self.raw.get("subresource", "")),
        )


def _read_entries(value: Any) -> list[_Entry]:
    if not isinstance(value, list):
        return []
    entries = [
        _Entry(dict(raw), field_paths(raw.get("fieldsV1")))
        for raw in value
        if isinstance(raw, dict) and raw.get("manager")
    ]
    return entries


def _new_entry(manager: str, operation: str, subresource: str | None) -> _Entry:
    raw: dict[str, Any] = {"manager": manager, "operation": operation}
    if subresource:
        raw["subresource"] = subresource
    return _Entry(raw, set(), True)


def _touch(entry: _Entry, api_version: str, now: str) -> None:
    entry.raw["apiVersion"] = api_version
    entry.raw["time"] = now
    entry.dirty = True


def _write_entries(obj: dict[str, Any], entries: list[_Entry]) -> None:
    rendered: list[dict[str, Any]] = []
    for entry in entries:
        if entry.dirty and not entry.fields:
            continue
        if entry.dirty:
            rendered.append(_render(entry))
        else:
            rendered.append(entry.raw)
    metadata = obj.setdefault("metadata", {})
    if rendered:
        metadata["managedFields"] = rendered
    else:
        metadata.pop("managedFields", None)


def _render(entry: _Entry) -> dict[str, Any]:
    raw = entry.raw
    out: dict[str, Any] = {"manager": raw["manager"], "operation": raw["operation"]}
    for key in ("apiVersion", "time"):
        if key in raw:
            out[key] = raw[key]
    out["fieldsType"] = "FieldsV1"
    out["fieldsV1"] = fields_v1(entry.fields)
    if raw.get("subresource"):
        out["subresource"] = raw["subresource"]
    return out


def _find_entry(entries: list[_Entry], ident: tuple[str, str, str]) -> _Entry | None:
    return next((e for e in entries if e.ident == ident), None)


def _prune_missing(entries: Iterable[_Entry], obj: Any, kind: str) -> None:
    """Drop ownership of fields that no longer exist in ``obj``."""
    for entry in entries:
        kept = {p for p in entry.fields if has_path(obj, p, kind)}
        if kept != entry.fields:
            entry.fields = kept
            entry.dirty = True


# --------------------------------------------------------------------------- apply


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _apply_config(applied: Mapping[str, Any]) -> dict[str, Any]:
    """The applied object without nulls and without fields only the server sets."""
    config: dict[str, Any] = _without_nulls(copy.deepcopy(dict(applied)))
    metadata = config.get("metadata")
    if isinstance(metadata, dict):
        for key in _SERVER_META:
            metadata.pop(key, None)
    return config


def _merge(live: Any, applied: Any, norm: Path, kind: str) -> Any:
    """Merge an applied value into a live value (both owned by the caller)."""
    if isinstance(live, dict) and isinstance(applied, dict) and not map_is_atomic(kind, norm):
        for key, value in applied.items():
            live[key] = _merge(live[key], value, (*norm, key), kind) if key in live else value
        return live
    if isinstance(live, list) and isinstance(applied, list):
        return _merge_list(live, applied, norm, kind)
    return applied


def _merge_list(live: list[Any], applied: list[Any], norm: Path, kind: str) -> list[Any]:
    info = list_info(kind, norm)
    if info.list_type == "atomic":
        return applied
    live_elements = _item_elements(live, info)
    applied_elements = _item_elements(applied, info)
    if live_elements is None or applied_elements is None:
        return applied
    index = {element: position for position, element in enumerate(live_elements)}
    for item, element in zip(applied, applied_elements, strict=True):
        position = index.get(element)
        if position is None:
            index[element] = len(live)
            live.append(item)
        elif info.list_type == "map":
            live[position] = _merge(live[position], item, norm, kind)
    return live


def _conflicts(
    live: dict[str, Any], config: dict[str, Any], applied: set[FieldPath], others: list[_Entry], kind: str
) -> list[tuple[_Entry, FieldPath]]:
    found: list[tuple[_Entry, FieldPath]] = []
    for entry in others:
        for path in sorted(applied & entry.fields):
            if _differs(live, config, path, kind):
                found.append((entry, path))
    return found


def _prefixes(paths: Iterable[FieldPath]) -> set[FieldPath]:
    return {path[:i] for path in paths for i in range(1, len(path) + 1)}


def _owns_whole(paths: set[FieldPath], path: FieldPath) -> bool:
    """Whether ``path`` is a leaf of ``paths`` (an atomic value); list-item membership is not."""
    return path in paths and path[-1].startswith("f:")


def _drop_unapplied(
    obj: dict[str, Any], stale: set[FieldPath], applied: set[FieldPath], others: list[_Entry], kind: str
) -> None:
    """Remove fields the manager stopped applying, unless someone else still owns them (or below)."""
    kept = _prefixes(applied) | _prefixes(p for e in others for p in e.fields)
    for path in sorted(stale, key=len):
        if path in kept or any(_owns_whole(applied, path[:i]) for i in range(1, len(path))):
            continue
        if not has_path(obj, path, kind):
            continue
        _remove_path(obj, path, kind)
        for depth in range(len(path) - 1, 0, -1):
            parent = path[:depth]
            emptied = value_at(obj, parent, kind) in ({}, [])  # a list or map left with nothing in it
            if parent in kept or not parent[-1].startswith("f:") or not emptied:
                break
            _remove_path(obj, parent, kind)


def apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    *,
    kind: str,
    manager: str,
    force: bool,
    api_version: str,
    now: str,
    subresource: str | None = None,
) -> dict[str, Any]:
    """Server-side apply ``applied`` by ``manager`` onto ``live`` (``None``: create); returns the new object.

    Raises :class:`ApplyConflict` when another manager owns an applied field with
    a different value and ``force`` is false; with ``force`` the ownership moves.
    The caller sets uid, resourceVersion and the like on a created object.
    """
    config = _apply_config(applied)
    applied_paths = field_set(config, kind)
    ident = (manager, "Apply", subresource or "")
    if live is None:
        result, entries = config, []
    else:
        result = copy.deepcopy(live)
        entries = _read_entries(live.get("metadata", {}).get("managedFields"))
    mine = _find_entry(entries, ident)
    others = [e for e in entries if e is not mine]
    if live is not None:
        _resolve_conflicts(live, config=config, applied=applied_paths, others=others, kind=kind, force=force)
        result = _merge(result, config, (), kind)
        previous = mine.fields if mine else set()
        _drop_unapplied(result, previous - applied_paths, applied_paths, others, kind)
        _prune_missing(others, result, kind)
    if mine is None:
        mine = _new_entry(manager, "Apply", subresource)
        entries.append(mine)
    mine.fields = applied_paths
    _touch(mine, api_version, now)
    _write_entries(result, entries)
    return result


def _resolve_conflicts(
    live: dict[str, Any],
    *,
    config: dict[str, Any],
    applied: set[FieldPath],
    others: list[_Entry],
    kind: str,
    force: bool,
) -> None:
    found = _conflicts(live, config, applied, others, kind)
    if not found:
        return
    if not force:
        versions = {e.ident[0]: str(e.raw.get("apiVersion", "")) for e, _ in found}
        raise ApplyConflict([(e.ident[0], path_string(p)) for e, p in found], versions)
    for entry, path in found:
        entry.fields.discard(path)
        entry.dirty = True


# --------------------------------------------------------------------------- update


def _base_entries(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[_Entry]:
    """The entries an update starts from: the client's if it changed them, else the stored ones."""
    old_value = (old or {}).get("metadata", {}).get("managedFields")
    new_value = new.get("metadata", {}).get("managedFields")
    if isinstance(new_value, list) and new_value and not json_equal(new_value, old_value):
        return _read_entries(new_value)
    return _read_entries(old_value)


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    kind: str,
    manager: str,
    api_version: str,
    now: str,
    subresource: str | None = None,
) -> dict[str, Any]:
    """Record a POST/PUT/PATCH by ``manager`` (operation ``Update``); returns ``new`` with managedFields.

    Fields that changed (all of them on create, ``old is None``) become owned by
    ``manager`` and leave every other manager's set.  If the client sent a
    managedFields value different from the stored one (``kubectl`` csaupgrade
    JSON-patches it), that value is the starting point and is kept verbatim when
    nothing else changed; ``[{}]`` clears it, and an absent or empty value keeps
    the stored entries.
    """
    result = copy.deepcopy(new)
    entries = _base_entries(old, new)
    new_paths = field_set(result, kind)
    changed = {p for p in new_paths if old is None or _differs(old, result, p, kind)}
    removed = old is not None and any(not has_path(result, p, kind) for p in field_set(old, kind))
    if changed or removed:
        ident = (manager, "Update", subresource or "")
        mine = _find_entry(entries, ident)
        for entry in entries:
            if entry is not mine and entry.fields & changed:
                entry.fields -= changed
                entry.dirty = True
        _prune_missing(entries, result, kind)
        if changed:
            if mine is None:
                mine = _new_entry(manager, "Update", subresource)
                entries.append(mine)
            mine.fields |= changed
            _touch(mine, api_version, now)
    _write_entries(result, entries)
    return result
