"""Server-side sharded LIST and WATCH (KEP-5866, kube-apiserver 1.36 alpha ``ShardedListAndWatch``).

Why this module exists: replicas of a sharded controller each want only their slice of a collection.
A ``shardSelector`` query parameter names that slice as one or more hash ranges joined by ``||``::

    shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
      || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')

An object is selected when the 64-bit FNV-1a hash of the named field (``object.metadata.uid`` or
``object.metadata.namespace``; the empty string for a cluster-scoped object's namespace) lies in
``[start, end)`` of any range. Bounds are quoted hexadecimal numbers with a ``0x`` prefix, at most
``0x10000000000000000`` (2**64, so the last range can include the largest hash). Anything else is
a 400. The list answer echoes the selector in ``metadata.shardInfo.selector`` so that a client can
tell a sharded answer from the whole collection an older server sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hybrid_operator.localcluster import errors

FIELDS = ("object.metadata.uid", "object.metadata.namespace")
HASH_SPACE = 1 << 64
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = HASH_SPACE - 1

_TERM = re.compile(
    r"\s*shardRange\s*\(\s*(?P<field>[A-Za-z_.]+)\s*,\s*(?P<q1>['\"])(?P<start>[^'\"]*)(?P=q1)\s*,"
    r"\s*(?P<q2>['\"])(?P<end>[^'\"]*)(?P=q2)\s*\)\s*")
_HEX = re.compile(r"0[xX][0-9a-fA-F]{1,17}")


def fnv1a64(text: str) -> int:
    """The 64-bit FNV-1a hash of ``text``'s UTF-8 bytes."""
    value = _FNV_OFFSET
    for byte in text.encode():
        value = ((value ^ byte) * _FNV_PRIME) & _MASK
    return value


@dataclass(frozen=True)
class ShardRange:
    """``start <= fnv1a64(field) < end``."""

    field: str
    start: int
    end: int

    def matches(self, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        key = meta.get("uid") if self.field == "object.metadata.uid" else meta.get("namespace")
        return self.start <= fnv1a64(str(key or "")) < self.end


@dataclass(frozen=True)
class ShardSelector:
    """A parsed ``shardSelector``: the ranges, any of which selects an object, and the text as given."""

    text: str
    ranges: tuple[ShardRange, ...]

    def matches(self, obj: dict[str, Any]) -> bool:
        return any(r.matches(obj) for r in self.ranges)

    def info(self) -> dict[str, str]:
        """The ``shardInfo`` of a list answered with this selector."""
        return {"selector": self.text}


def _invalid(text: str, why: str) -> errors.ApiError:
    return errors.bad_request(f'shardSelector: Invalid value: "{text}": {why}')


def _bound(text: str, value: str, what: str) -> int:
    if not _HEX.fullmatch(value):
        raise _invalid(text, f"{what} {value!r} must be a hexadecimal number with a 0x prefix")
    number = int(value, 16)
    if number > HASH_SPACE:
        raise _invalid(text, f"{what} {value} is beyond 0x10000000000000000")
    return number


def parse(text: str) -> ShardSelector | None:
    """Parse a ``shardSelector`` parameter; None when it is absent or empty; a 400 when malformed."""
    if not text or not text.strip():
        return None
    ranges: list[ShardRange] = []
    for term in text.split("||"):
        found = _TERM.fullmatch(term)
        if found is None:
            raise _invalid(text, "expected shardRange(<field>, '<0x start>', '<0x end>') terms joined by ||")
        field = found["field"]
        if field not in FIELDS:
            raise _invalid(text, f"unsupported field {field!r}: supported fields are {', '.join(FIELDS)}")
        start, end = _bound(text, found["start"], "start"), _bound(text, found["end"], "end")
        if start >= end:
            raise _invalid(text, f"start {found['start']} must be below end {found['end']}")
        ranges.append(ShardRange(field, start, end))
    return ShardSelector(text, tuple(ranges))
