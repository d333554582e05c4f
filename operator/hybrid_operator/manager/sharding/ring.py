"""The hash ring of sharded replicas: buckets, their assignment to members, and shard selectors.

Why this module exists: every replica must compute, from the same list of live members, the same
answer to "which replica owns this object", without talking to the others. The 64-bit FNV-1a hash
space of the shard key (``metadata.uid``, or ``metadata.namespace``) is cut into :data:`BUCKETS`
equal ranges. :func:`assign` gives each bucket to one member by rendezvous hashing with bounded
load: buckets are placed one by one, each on the member ranking it highest among those still below
their share (``ceil(BUCKETS / members)``), so the split is even to one bucket, the same on every
replica, and a member joining or leaving moves only about ``1/members`` of the buckets.

:func:`selector` writes a set of buckets as the KEP-5866 ``shardSelector`` the API server filters
with (adjacent buckets merged into one ``shardRange``), and :func:`bucket_of` is the client-side
filter used when the server ignores that selector. Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

BUCKETS = 32
HASH_SPACE = 1 << 64
WIDTH = HASH_SPACE // BUCKETS
KEYS = {"uid": "object.metadata.uid", "namespace": "object.metadata.namespace"}

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def fnv1a64(text: str) -> int:
    """64-bit FNV-1a of ``text``'s UTF-8 bytes (the hash KEP-5866 servers use)."""
    value = _FNV_OFFSET
    for byte in text.encode():
        value = ((value ^ byte) * _FNV_PRIME) % HASH_SPACE
    return value


def key_value(obj: Mapping[str, Any], key: str) -> str:
    """The shard key of an object: its uid, or its namespace ("" for a cluster-scoped object)."""
    meta = obj.get("metadata") or {}
    return str(meta.get("uid" if key == "uid" else "namespace") or "")


def bucket_of(value: str) -> int:
    """The bucket of a shard key value."""
    return fnv1a64(value) // WIDTH


def assign(members: Iterable[str], buckets: int = BUCKETS) -> dict[str, frozenset[int]]:
    """Each member's buckets: deterministic, even to one bucket, little movement when members change."""
    names = sorted(set(members))
    if not names:
        return {}
    share = math.ceil(buckets / len(names))
    load = dict.fromkeys(names, 0)
    owned: dict[str, set[int]] = {name: set() for name in names}
    for bucket in range(buckets):
        ranked = sorted(names, key=lambda name: fnv1a64(f"{name}/{bucket}"), reverse=True)
        chosen = next(name for name in ranked if load[name] < share)
        load[chosen] += 1
        owned[chosen].add(bucket)
    return {name: frozenset(found) for name, found in owned.items()}


def ranges(owned: Iterable[int], buckets: int = BUCKETS) -> list[tuple[int, int]]:
    """``[start, end)`` hash ranges covering the buckets, adjacent buckets merged."""
    width = HASH_SPACE // buckets
    merged: list[tuple[int, int]] = []
    for bucket in sorted(set(owned)):
        start, end = bucket * width, (bucket + 1) * width if bucket < buckets - 1 else HASH_SPACE
        if merged and merged[-1][1] == start:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def selector(owned: Iterable[int], key: str = "uid", buckets: int = BUCKETS) -> str:
    """The ``shardSelector`` for these buckets ("" for none: a replica owning nothing watches nothing)."""
    field = KEYS[key]
    return " || ".join(f"shardRange({field}, '0x{start:016x}', '0x{end:016x}')"
                       for start, end in ranges(owned, buckets))


def probe_selector(key: str = "uid") -> str:
    """A ``shardSelector`` one hash value wide (``[0, 1)``), which no object is in (2**-64 for any one object):
    a server that applies it answers a ``limit=1`` list with nothing, one that ignores it with an object."""
    return f"shardRange({KEYS[key]}, '0x{0:016x}', '0x{1:016x}')"


def describe(owned: Sequence[int] | frozenset[int]) -> str:
    """Buckets as a short sorted list for Lease annotations and logs: ``0,3,7``."""
    return ",".join(str(b) for b in sorted(owned))


def parse_buckets(text: str | None) -> frozenset[int]:
    """The buckets written by :func:`describe`; unreadable entries are ignored."""
    found = set()
    for part in (text or "").split(","):
        if part.strip().isdigit() and int(part) < BUCKETS:
            found.add(int(part))
    return frozenset(found)
