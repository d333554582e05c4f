"""``metadata.managedFields``: which field manager owns which fields, and ordinary writes' share.

kube-apiserver keeps, per manager, operation (``Apply`` or ``Update``) and
subresource, the set of fields that manager set (as FieldsV1, see
:mod:`.fieldpaths`).  This module reads and writes those entries, keeping
untouched ones verbatim, and records ordinary POST/PUT/PATCH writes
(:func:`record_update`): the writer takes ownership of what it changed, and
every other manager loses it.  Server-side apply (:mod:`.applying`) uses the
same entries.

``status`` is tracked like any field: when status is a subresource, the
caller must remove ``status`` from the new object of a main-resource write
(and everything but ``status`` and metadata for a ``/status`` write) before
calling in here.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.semantics.fieldpaths import (
    FieldPath,
    differs,
    field_paths,
    field_set,
    fields_v1,
    has_path,
)
from hybrid_operator.localcluster.semantics.patching import json_equal

# --------------------------------------------------------------------------- managedFields entries


@dataclass
class Entry:
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


def read_entries(value: Any) -> list[Entry]:
    if not isinstance(value, list):
        return []
    entries = [
        Entry(dict(raw), field_paths(raw.get("fieldsV1")))
        for raw in value
        if isinstance(raw, dict) and raw.get("manager")
    ]
    return entries


def new_entry(manager: str, operation: str, subresource: str | None) -> Entry:
    raw: dict[str, Any] = {"manager": manager, "operation": operation}
    if subresource:
        raw["subresource"] = subresource
    return Entry(raw, set(), True)


def touch(entry: Entry, api_version: str, now: str) -> None:
    entry.raw["apiVersion"] = api_version
    entry.raw["time"] = now
    entry.dirty = True


def write_entries(obj: dict[str, Any], entries: list[Entry]) -> None:
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


def _render(entry: Entry) -> dict[str, Any]:
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


def find_entry(entries: list[Entry], ident: tuple[str, str, str]) -> Entry | None:
    return next((e for e in entries if e.ident == ident), None)


def prune_missing(entries: Iterable[Entry], obj: Any, kind: str) -> None:
    """Drop ownership of fields that no longer exist in ``obj``."""
    for entry in entries:
        kept = {p for p in entry.fields if has_path(obj, p, kind)}
        if kept != entry.fields:
            entry.fields = kept
            entry.dirty = True


# --------------------------------------------------------------------------- ordinary writes


def _base_entries(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[Entry]:
    """The entries an update starts from: the client's if it changed them, else the stored ones."""
    old_value = objects.meta(old).get("managedFields") if old is not None else None
    new_value = objects.meta(new).get("managedFields")
    if isinstance(new_value, list) and new_value and not json_equal(new_value, old_value):
        return read_entries(new_value)
    return read_entries(old_value)


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
    changed = {p for p in new_paths if old is None or differs(old, result, p, kind)}
    removed = old is not None and any(not has_path(result, p, kind) for p in field_set(old, kind))
    if changed or removed:
        mine = find_entry(entries, (manager, "Update", subresource or ""))
        _take_ownership(entries, mine, changed)
        prune_missing(entries, result, kind)
        if changed:
            if mine is None:
                mine = new_entry(manager, "Update", subresource)
                entries.append(mine)
            mine.fields |= changed
            touch(mine, api_version, now)
    write_entries(result, entries)
    return result


def _take_ownership(entries: list[Entry], mine: Entry | None, changed: set[FieldPath]) -> None:
    """Every manager but ``mine`` loses the fields ``mine`` changed."""
    for entry in entries:
        if entry is not mine and entry.fields & changed:
            entry.fields -= changed
            entry.dirty = True
