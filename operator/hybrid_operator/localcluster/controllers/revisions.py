"""ControllerRevisions: the template history of StatefulSets and DaemonSets.

kube keeps one ControllerRevision per pod template a StatefulSet or
DaemonSet has had, named ``<owner>-<hash>``, labelled with the hash, owned
by the workload, with an increasing ``revision`` and the template as a
strategic merge patch (``$patch: replace``) in ``data``: what ``kubectl
rollout history`` lists and ``kubectl rollout undo`` applies.  Older
revisions beyond ``revisionHistoryLimit`` are pruned.
"""

from __future__ import annotations

import copy
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers.pods import controller_ref
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import CONTROLLERREVISIONS_KEY

HASH_LABEL = "controller.kubernetes.io/hash"


def _number(revision: dict[str, Any]) -> int:
    value = revision.get("revision")
    return value if isinstance(value, int) else 0


def ensure_revision(view: ClusterView, owner: dict[str, Any], template_hash: str) -> str:
    """The name of the owner's ControllerRevision for ``template_hash``, created (or renumbered) when needed."""
    name = f"{objects.name(owner)}-{template_hash}"
    revisions = view.owned(CONTROLLERREVISIONS_KEY, objects.uid(owner))
    latest = max((_number(r) for r in revisions), default=0)
    existing = next((r for r in revisions if objects.name(r) == name), None)
    if existing is None:
        template = copy.deepcopy(objects.dig(owner, "spec", "template") or {})
        template["$patch"] = "replace"
        labels = dict(objects.dig(template, "metadata", "labels") or {})
        labels[HASH_LABEL] = template_hash
        view.create(CONTROLLERREVISIONS_KEY, objects.namespace(owner), {
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": name, "namespace": objects.namespace(owner), "labels": labels,
                         "ownerReferences": [controller_ref(owner)]},
            "data": {"spec": {"template": template}}, "revision": latest + 1})
    elif _number(existing) < latest:
        def renumber(revision: dict[str, Any]) -> None:
            revision["revision"] = latest + 1  # a rollback makes an old template the newest revision

        view.update((CONTROLLERREVISIONS_KEY, objects.namespace(owner), name), renumber)
    return name


def prune(view: ClusterView, owner: dict[str, Any], keep: set[str]) -> None:
    """Delete the oldest revisions beyond ``revisionHistoryLimit`` (never those named in ``keep``)."""
    limit = objects.dig(owner, "spec", "revisionHistoryLimit")
    limit = limit if isinstance(limit, int) and limit >= 0 else 10
    old = sorted((r for r in view.owned(CONTROLLERREVISIONS_KEY, objects.uid(owner)) if objects.name(r) not in keep),
                 key=_number)
    for revision in old[:max(0, len(old) - limit)]:
        view.delete((CONTROLLERREVISIONS_KEY, objects.namespace(revision), objects.name(revision)))
