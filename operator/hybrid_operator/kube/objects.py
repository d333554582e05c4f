"""Typed accessors for Kubernetes objects held as plain JSON dicts.

Objects arrive from the API as dicts whose ``metadata`` (and its maps) may be missing or ``null``;
every reader used to spell ``(obj.get("metadata") or {})`` itself. These accessors answer with the
right type and an empty value for a missing field, and never mutate the object.
"""

import json
from collections.abc import Mapping
from typing import Any


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` (an empty dict when absent or not a map)."""
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def name(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def namespace(obj: Mapping[str, Any]) -> str:
    """The namespace ("" for a cluster-scoped object)."""
    return str(meta(obj).get("namespace") or "")


def key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)``: how work queues and caches know an object."""
    return namespace(obj), name(obj)


def uid(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid") or "")


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    value = meta(obj).get("labels")
    return value if isinstance(value, dict) else {}


def annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    value = meta(obj).get("annotations")
    return value if isinstance(value, dict) else {}


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    value = meta(obj).get("finalizers")
    return [str(item) for item in value] if isinstance(value, list) else []


def owner_references(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    value = meta(obj).get("ownerReferences")
    return [ref for ref in value if isinstance(ref, dict)] if isinstance(value, list) else []


def generation(obj: Mapping[str, Any]) -> int | None:
    value = meta(obj).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def resource_version(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("resourceVersion") or "")


def deleting(obj: Mapping[str, Any]) -> bool:
    """True once ``metadata.deletionTimestamp`` is set."""
    return bool(meta(obj).get("deletionTimestamp"))


def spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    value = obj.get("spec")
    return value if isinstance(value, dict) else {}


def status(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """``status`` when it is a map, else None (a CR that was never reconciled has none)."""
    value = obj.get("status")
    return value if isinstance(value, dict) else None


def group_version(api_version: str) -> tuple[str, str]:
    """``("apps", "v1")`` from ``apps/v1``; ``("", "v1")`` for the core group."""
    group, _, version = api_version.rpartition("/")
    return group, version


#: the annotation client-side ``kubectl apply`` keeps the applied manifest in (its three-way merge base)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_GO_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def last_applied(manifest: Mapping[str, Any]) -> str:
    """The value ``kubectl apply`` gives :data:`LAST_APPLIED` for ``manifest``.

    As kubectl writes it: the manifest without that annotation (``annotations`` kept, possibly empty),
    as Go's JSON encoder would -- compact, sorted keys, UTF-8, HTML characters escaped, a final newline.
    """
    metadata = dict(meta(manifest))
    metadata["annotations"] = {k: v for k, v in annotations(manifest).items() if k != LAST_APPLIED}
    text = json.dumps({**manifest, "metadata": metadata}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "".join(_GO_HTML_ESCAPES.get(char, char) for char in text) + "\n"
