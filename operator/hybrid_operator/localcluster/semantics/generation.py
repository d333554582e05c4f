"""When a write changes nothing, and when it bumps ``metadata.generation``.

kube-apiserver answers a write that would change nothing but managedFields
timestamps with the stored object, without a new resourceVersion or watch
event (``kubectl apply`` and every controller's status write rely on that
to stay quiet).  ``generation`` counts changes to the desired state only:
everything but metadata, and but status where status is a subresource (or
the kind is built in), which is what ``observedGeneration`` is compared with.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster.resources import ResourceInfo


def same_content(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """A no-op write: nothing but managedFields timestamps would change."""
    if _content(old) != _content(new):
        return False
    return _managed_sans_time(old) == _managed_sans_time(new)


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    trimmed = {key: value for key, value in obj.items() if key != "metadata"}
    meta = {key: value for key, value in obj["metadata"].items() if key not in ("resourceVersion", "managedFields")}
    trimmed["metadata"] = meta
    return trimmed


def _managed_sans_time(obj: dict[str, Any]) -> list[Any]:
    return [{k: v for k, v in entry.items() if k != "time"} for entry in obj["metadata"].get("managedFields") or []]


def carry_generation(info: ResourceInfo, existing: dict[str, Any], new: dict[str, Any]) -> None:
    """``new``'s generation: the stored one, plus one when the desired state changed."""
    meta = new["metadata"]
    meta["generation"] = existing["metadata"].get("generation")
    if meta["generation"] is None:
        meta.pop("generation")
    elif spec_changed(info, existing, new):
        meta["generation"] = int(meta["generation"]) + 1


def spec_changed(info: ResourceInfo, old: dict[str, Any], new: dict[str, Any]) -> bool:
    skip = {"metadata", "apiVersion", "kind"}
    if "status" in info.subresources or not info.custom:
        skip.add("status")
    old_rest = {k: v for k, v in old.items() if k not in skip}
    new_rest = {k: v for k, v in new.items() if k not in skip}
    return old_rest != new_rest
