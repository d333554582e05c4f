"""LIST: which stored objects a selector picks, and paging them with continue tokens.

kube-apiserver answers ``limit`` with a page and an opaque ``continue`` token
(plus ``remainingItemCount``); following pages come from the same snapshot
resourceVersion and resume after the last key returned.  Objects are listed
in key order (namespace, then name), so the key of the last item is where the
next page starts.

As its watch cache does (``Cacher.GetList``, which serves these lists): a page
holds the first ``limit`` objects the selectors pick among those after the
continue key; there is a ``continue`` token whenever the page's last object is
not the last *stored* one (so a page of every remaining match can still carry a
token, and the next page is empty); ``remainingItemCount`` is the number of
stored objects after the continue key minus ``limit``, whatever a KEP-5866
shard selector filtered out, and absent when a label or field selector is set.
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


def select_page(
    stored: Iterable[dict[str, Any]],
    labels: LabelSelector | None,
    fields: FieldSelector | None,
    after: str = "",
    shard: ShardSelector | None = None,
    limit: int = 0,
    list_rv: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``stored`` objects after key ``after`` that the selectors pick, at most ``limit`` (0: all), and the
    list metadata that goes with them (resourceVersion, and continue and remainingItemCount for a partial page)."""
    everything = (labels is None or labels.empty) and (fields is None or fields.empty)
    candidates = [obj for obj in stored if not after or _sort_key(obj) > after]
    chosen: list[dict[str, Any]] = []
    more = False
    for index, obj in enumerate(candidates):
        if (everything or matches(obj, labels, fields)) and (shard is None or shard.matches(obj)):
            chosen.append(obj)
        if limit and len(chosen) >= limit:
            more = index < len(candidates) - 1
            break
    meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
    if more:
        token = {"rv": list_rv, "start": _sort_key(chosen[-1])}
        meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
        if everything:
            meta["remainingItemCount"] = len(candidates) - limit
    return chosen, meta


def matches(obj: dict[str, Any], labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    """Whether the object's labels and fields satisfy the selectors (None: no condition)."""
    if labels is not None and not labels.matches(objects.labels(obj)):
        return False
    return fields is None or fields.matches(obj)


def _sort_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"
