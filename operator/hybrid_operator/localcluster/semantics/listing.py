"""LIST: which stored objects a selector picks, and paging them with continue tokens.

kube-apiserver answers ``limit`` with a page and an opaque ``continue`` token
(plus ``remainingItemCount``); following pages come from the same snapshot
resourceVersion and resume after the last key returned.  Objects are listed
in key order (namespace, then name), so the key of the last item is where the
next page starts.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

from hybrid_operator.localcluster import errors, objects
from hybrid_operator.localcluster.semantics.fieldselectors import FieldSelector
from hybrid_operator.localcluster.semantics.labelselectors import LabelSelector
from hybrid_operator.localcluster.semantics.shardselectors import ShardSelector


def decode_continue(token: str) -> tuple[int, str]:
    """The snapshot resourceVersion and the key to resume after, from a ``continue`` token."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(decoded["rv"]), str(decoded["start"])
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc


def selected(
    stored: Iterable[dict[str, Any]],
    labels: LabelSelector | None,
    fields: FieldSelector | None,
    after: str = "",
    shard: ShardSelector | None = None,
) -> list[dict[str, Any]]:
    """The ``stored`` objects the selectors pick, from the one after key ``after`` on."""
    everything = (labels is None or labels.empty) and (fields is None or fields.empty)
    matched = [obj for obj in stored if (everything or matches(obj, labels, fields))
               and (shard is None or shard.matches(obj))]
    if after:
        matched = [obj for obj in matched if _sort_key(obj) > after]
    return matched


def matches(obj: dict[str, Any], labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    """Whether the object's labels and fields satisfy the selectors (None: no condition)."""
    if labels is not None and not labels.matches(objects.labels(obj)):
        return False
    return fields is None or fields.matches(obj)


def _sort_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def page(matched: list[dict[str, Any]], limit: int, list_rv: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """At most ``limit`` objects (0: all) and the list metadata that goes with them."""
    meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
    if not limit or len(matched) <= limit:
        return matched, meta
    token = {"rv": list_rv, "start": _sort_key(matched[limit - 1])}
    meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
    meta["remainingItemCount"] = len(matched) - limit
    return matched[:limit], meta
