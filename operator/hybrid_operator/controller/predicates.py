"""The event filter: which watch events of a primary resource deserve a reconcile.

Events only say "look again"; this decides whether looking again can change anything, as the
Operator SDK's predicates do, plus the first sight of an object:

* Ansible kinds: the SDK's default predicate -- a generation change, an object without a generation,
  a deletion starting -- and annotation changes with ``watchAnnotationsChanges``;
* Helm kinds: the SDK's Helm controller watches its CRs with no predicate at all, so annotation
  (``reconcile-period``, ``uninstall-wait``, ``upgrade-force``, ``*-disable-hooks``) and label
  changes count too. The operator's own writes (status, finalizers) are left out by the controller
  (:class:`~hybrid_operator.controller.reconcile.OwnWrites`), so they never start a reconcile.

It remembers a little of each object (:class:`Seen`); losing that memory only costs one reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hybrid_operator.config.model import AnsibleWatch, HelmWatch, Watch
from hybrid_operator.controller.dependents import DEPENDENT_KINDS_ANNOTATION
from hybrid_operator.kube import objects


@dataclass(frozen=True)
class Seen:
    """What the event filter remembers of an object (a cache: losing it only costs one reconcile)."""

    generation: Any
    annotations: tuple[tuple[str, str], ...]
    deleting: bool
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class MetadataChanges:
    """Which metadata-only changes of a primary count (beyond the generation)."""

    annotations: bool = False
    labels: bool = False


def metadata_changes(watch: Watch) -> MetadataChanges:
    """Helm kinds react to every annotation and label change (no predicate in the SDK); Ansible kinds
    to annotation changes only with ``watchAnnotationsChanges``."""
    if isinstance(watch, HelmWatch):
        return MetadataChanges(annotations=True, labels=True)
    return MetadataChanges(annotations=isinstance(watch, AnsibleWatch) and watch.watch_annotations_changes)


def seen(body: dict[str, Any]) -> Seen:
    """What the filter remembers of ``body`` (kopf's annotations and the one earlier versions of this
    operator wrote left out, so removing it from an old object starts nothing)."""
    annotations = tuple(sorted((str(k), str(v)) for k, v in objects.annotations(body).items()
                               if not str(k).startswith("kopf.zalando.org/")
                               and k != DEPENDENT_KINDS_ANNOTATION))
    labels = tuple(sorted((str(k), str(v)) for k, v in objects.labels(body).items()))
    return Seen(objects.meta(body).get("generation"), annotations, objects.deleting(body), labels)


def wants_reconcile(previous: Seen | None, current: Seen, event_type: str,
                    changes: MetadataChanges | bool = False) -> bool:
    """The Operator SDK's predicate for the watch (see the module docstring), plus deletion and first sight.

    ``changes`` True is ``MetadataChanges(annotations=True)`` (``watchAnnotationsChanges``).
    """
    if isinstance(changes, bool):
        changes = MetadataChanges(annotations=changes)
    if event_type == "DELETED" or previous is None:
        return True
    if current.generation is None or current.generation != previous.generation:
        return True
    if current.deleting != previous.deleting:
        return True
    if changes.annotations and current.annotations != previous.annotations:
        return True
    return changes.labels and current.labels != previous.labels
