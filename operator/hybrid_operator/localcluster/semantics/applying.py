"""Server-side apply, as a pure function over the live object and the applied configuration.

``PATCH`` with ``application/apply-patch+yaml`` sends the fields a manager
wants, not a change: :func:`apply` merges that configuration into the live
object list-type aware (:mod:`.mergekeys`), reports fields another manager
owns with a different value as an :class:`ApplyConflict` (unless forced, when
ownership moves), and drops fields the manager applied before but no longer
applies, unless someone else still owns them.  Ownership is recorded in
``metadata.managedFields`` (:mod:`.managedfields`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.errors import ApiError
from hybrid_operator.localcluster.semantics import managedfields
from hybrid_operator.localcluster.semantics.fieldpaths import (
    IGNORED_META,
    FieldPath,
    differs,
    field_set,
    has_path,
    item_elements,
    path_string,
    remove_path,
    value_at,
)
from hybrid_operator.localcluster.semantics.managedfields import Entry
from hybrid_operator.localcluster.semantics.mergekeys import Path, list_info, map_is_atomic

_SERVER_META = IGNORED_META - {"name", "namespace"}


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
        """The 409 Conflict :class:`ApiError` a client is answered with."""
        details: dict[str, Any] = {"name": name, "group": group, "kind": plural, "causes": self.causes()}
        return ApiError(409, "Conflict", self.message(), details)


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
    live_elements = item_elements(live, info)
    applied_elements = item_elements(applied, info)
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
    live: dict[str, Any], config: dict[str, Any], applied: set[FieldPath], others: list[Entry], kind: str
) -> list[tuple[Entry, FieldPath]]:
    found: list[tuple[Entry, FieldPath]] = []
    for entry in others:
        for path in sorted(applied & entry.fields):
            if differs(live, config, path, kind):
                found.append((entry, path))
    return found


def _prefixes(paths: Iterable[FieldPath]) -> set[FieldPath]:
    return {path[:i] for path in paths for i in range(1, len(path) + 1)}


def _owns_whole(paths: set[FieldPath], path: FieldPath) -> bool:
    """Whether ``path`` is a leaf of ``paths`` (an atomic value); list-item membership is not."""
    return path in paths and path[-1].startswith("f:")


def _drop_unapplied(
    obj: dict[str, Any], stale: set[FieldPath], applied: set[FieldPath], others: list[Entry], kind: str
) -> None:
    """Remove fields the manager stopped applying, unless someone else still owns them (or below)."""
    kept = _prefixes(applied) | _prefixes(p for e in others for p in e.fields)
    for path in sorted(stale, key=len):
        if path in kept or any(_owns_whole(applied, path[:i]) for i in range(1, len(path))):
            continue
        if not has_path(obj, path, kind):
            continue
        remove_path(obj, path, kind)
        for depth in range(len(path) - 1, 0, -1):
            parent = path[:depth]
            emptied = value_at(obj, parent, kind) in ({}, [])  # a list or map left with nothing in it
            if parent in kept or not parent[-1].startswith("f:") or not emptied:
                break
            remove_path(obj, parent, kind)


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
        entries = managedfields.read_entries(objects.meta(live).get("managedFields"))
    mine = managedfields.find_entry(entries, ident)
    others = [e for e in entries if e is not mine]
    if live is not None:
        _resolve_conflicts(live, config=config, applied=applied_paths, others=others, kind=kind, force=force)
        result = _merge(result, config, (), kind)
        previous = mine.fields if mine else set()
        _drop_unapplied(result, previous - applied_paths, applied_paths, others, kind)
        managedfields.prune_missing(others, result, kind)
    if mine is None:
        mine = managedfields.new_entry(manager, "Apply", subresource)
        entries.append(mine)
    mine.fields = applied_paths
    managedfields.touch(mine, api_version, now)
    managedfields.write_entries(result, entries)
    return result


def _resolve_conflicts(
    live: dict[str, Any],
    *,
    config: dict[str, Any],
    applied: set[FieldPath],
    others: list[Entry],
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
