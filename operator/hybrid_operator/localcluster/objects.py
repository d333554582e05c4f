"""Typed accessors for the JSON objects every layer of the embedded API server handles.

Objects are plain dicts, as decoded from JSON.  Stored objects always carry a
``metadata`` dict, but the same code also reads client bodies, owners found
through a uid index and the fields of other objects, where anything may be
absent or of the wrong type.  These readers never raise and never add
anything to the object: they answer ``""``, ``{}``, ``[]`` or None for what is
missing or malformed, so callers write ``objects.namespace(obj)`` instead of
``str((obj.get("metadata") or {}).get("namespace", ""))``.  To change an object,
write to ``obj["metadata"]`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]


def dig(value: Any, *path: str) -> Any:
    """The value at ``path`` through nested dicts (``dig(obj, "spec", "replicas")``), or None."""
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` (the object's own dict, to read), or ``{}``."""
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def name(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name", ""))


def namespace(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace``; ``""`` for cluster-scoped objects."""
    return str(meta(obj).get("namespace", ""))


def uid(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid", ""))


def labels(obj: Mapping[str, Any]) -> dict[str, Any]:
    value = meta(obj).get("labels")
    return value if isinstance(value, dict) else {}


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    return list(meta(obj).get("finalizers") or [])


def deleting(obj: Mapping[str, Any]) -> bool:
    """Whether ``metadata.deletionTimestamp`` is set (the object waits for its finalizers)."""
    return bool(meta(obj).get("deletionTimestamp"))


def owner_refs(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The usable ownerReferences (malformed entries are ignored, never fatal)."""
    refs = meta(obj).get("ownerReferences")
    if not isinstance(refs, list):
        return []
    return [ref for ref in refs if isinstance(ref, dict) and ref.get("uid")]


def controller_uid(obj: Mapping[str, Any]) -> str:
    """The uid of the ``controller: true`` owner, or ``""``."""
    return next((str(ref["uid"]) for ref in owner_refs(obj) if ref.get("controller") is True), "")
