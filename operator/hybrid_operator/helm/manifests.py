"""A release's rendered manifest as objects: splitting it, and applying it the way helm does.

Drift repair re-applies the deployed manifest's objects with server-side apply as field manager
``helm``, carrying the ownership label and annotations helm itself adds at apply time (they are not
in the stored manifest); ``uninstall-wait`` reads the same objects to wait for them to go.
"""

from __future__ import annotations

from typing import Any

import yaml

from hybrid_operator.controller.dependents import ChildKind
from hybrid_operator.kube import objects

FIELD_MANAGER = "helm"
KEEP_POLICY = "helm.sh/resource-policy"


def manifest_objects(manifest: str) -> list[dict[str, Any]]:
    """The objects of a rendered manifest (``kind: List`` expanded, empty documents dropped)."""
    found: list[dict[str, Any]] = []
    for document in yaml.safe_load_all(manifest):
        if not isinstance(document, dict):
            continue
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            found += [item for item in document["items"] if isinstance(item, dict)]
        else:
            found.append(document)
    return found


def with_helm_ownership(obj: dict[str, Any], release: str, namespace: str) -> dict[str, Any]:
    """``obj`` with the label and annotations helm adds when it applies (they are not in the manifest)."""
    meta = dict(objects.meta(obj))
    meta["labels"] = {**(meta.get("labels") or {}), "app.kubernetes.io/managed-by": "Helm"}
    meta["annotations"] = {**(meta.get("annotations") or {}), "meta.helm.sh/release-name": release,
                           "meta.helm.sh/release-namespace": namespace}
    return {**obj, "metadata": meta}


def child_kinds(manifest: str) -> set[ChildKind]:
    """The kinds of a manifest's objects (what dependent watches are registered for)."""
    return {ChildKind(*objects.group_version(str(item.get("apiVersion", ""))), str(item.get("kind", "")))
            for item in manifest_objects(manifest) if item.get("kind")}
