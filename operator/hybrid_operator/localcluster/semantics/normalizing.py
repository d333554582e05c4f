"""Explicit ``null`` fields, dropped where kube-apiserver's typed decoding drops them.

kube-apiserver decodes a built-in object into its Go struct before storing it:
a ``null`` field leaves a nil pointer, slice or map (omitted when the object
is encoded again) or the zero value of a plain field, so ``initContainers:
null``, ``nodeSelector: null`` or ``env: null`` are simply gone.  Keeping them
made the same apply a change here (a new generation, a rollout that never
comes) and a no-op there.  Custom resources keep their nulls where the CRD
schema says ``nullable`` (see :mod:`.schema`), but their ``metadata`` is an
ObjectMeta like any other, so it is normalized for every kind.

A ``null`` inside a list, or a ``null`` value of a string map (labels, data),
becomes Go's zero value (``""``) instead: the schema walk in
:mod:`.builtinschemas` knows which is which, and does it for built-in kinds.
"""

from __future__ import annotations

from typing import Any


def drop_null_fields(value: Any) -> Any:
    """``value`` without ``null`` object members, at every depth (lists are walked, never shortened)."""
    if isinstance(value, dict):
        return {key: drop_null_fields(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [drop_null_fields(item) for item in value]
    return value


def normalize(obj: dict[str, Any], *, builtin: bool) -> None:
    """In place: the whole object of a built-in kind without a schema here, the ``metadata`` of any kind.

    Built-in kinds with a schema are normalized by the schema walk instead (it knows maps from structs).
    """
    if builtin:
        normalized = drop_null_fields(obj)
        obj.clear()
        obj.update(normalized)
    elif isinstance(obj.get("metadata"), dict):
        obj["metadata"] = drop_null_fields(obj["metadata"])
