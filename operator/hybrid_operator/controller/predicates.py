"""The event filter: which watch events of a primary resource deserve a reconcile.

Events only say "look again"; this decides whether looking again can change anything, as the
Operator SDK's default predicate does (a generation change, an object without a generation, a
deletion starting, annotations when ``watchAnnotationsChanges``), plus the first sight of an object.
It remembers a little of each object (:class:`Seen`); losing that memory only costs one reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hybrid_operator.controller import dependents
from hybrid_operator.kube import objects


@dataclass(frozen=True)
class Seen:
    """What the event filter remembers of an object (a cache: losing it only costs one reconcile)."""

    generation: Any
    annotations: tuple[tuple[str, str], ...]
    deleting: bool


def seen(body: dict[str, Any]) -> Seen:
    """What the filter remembers of ``body`` (kopf's and our own bookkeeping annotations left out)."""
    annotations = tuple(sorted((str(k), str(v)) for k, v in objects.annotations(body).items()
                               if not str(k).startswith("kopf.zalando.org/")
                               and k != dependents.DEPENDENT_KINDS_ANNOTATION))
    return Seen(objects.meta(body).get("generation"), annotations, objects.deleting(body))


def wants_reconcile(previous: Seen | None, current: Seen, event_type: str, watch_annotations: bool) -> bool:
    """The Operator SDK's default predicate, plus deletion and first sight."""
    if event_type == "DELETED" or previous is None:
        return True
    if current.generation is None or current.generation != previous.generation:
        return True
    if current.deleting != previous.deleting:
        return True
    return watch_annotations and current.annotations != previous.annotations
