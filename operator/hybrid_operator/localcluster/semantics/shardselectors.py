"""Server-side sharded LIST and WATCH (KEP-5866, kube-apiserver 1.36 alpha ``ShardedListAndWatch``).

Why this module exists: replicas of a sharded controller each want only their slice of a collection.
A ``shardSelector`` query parameter names that slice as one or more hash ranges joined by ``||``::

    shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
      || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')

An object is selected when the 64-bit FNV-1a hash of the named field (``object.metadata.uid`` or
``object.metadata.namespace``; the empty string for a cluster-scoped object's namespace) lies in
``[start, end)`` of any range.

This module answers exactly as kube-apiserver v1.36.3 does (docs/real-cluster.md, "KEP-5866", lists
the measured facts; tests/integration/test_kep5866_differential.py compares both servers): the text
is parsed as CEL (:mod:`.celsyntax`) and its tree walked, so only ``shardRange(<field>, '<bound>',
'<bound>')`` calls and ``||`` pass; a bound is ``0x`` and exactly 16 lowercase hex digits, or
``0x10000000000000000`` (2**64); every range uses the same field; start < end. Anything else is
refused with a 500 without a reason (kube-apiserver returns a plain error, not a Status) and the
real server's message, ``invalid shard selector: ...``. A selector of only spaces is refused too;
an empty parameter is no selector. :meth:`ShardSelector.info` is the normalised text kube-apiserver
echoes in ``metadata.shardInfo`` -- of lists of built-in kinds only (:func:`echoed`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.semantics import celsyntax
from hybrid_operator.localcluster.semantics.celsyntax import CelSyntaxError, Node

FIELDS = ("object.metadata.uid", "object.metadata.namespace")
HASH_SPACE = 1 << 64
TOP = "0x10000000000000000"
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = HASH_SPACE - 1
_HEX_DIGITS = frozenset("0123456789abcdef")


def fnv1a64(text: str) -> int:
    """The 64-bit FNV-1a hash of ``text``'s UTF-8 bytes."""
    value = _FNV_OFFSET
    for byte in text.encode():
        value = ((value ^ byte) * _FNV_PRIME) & _MASK
    return value


@dataclass(frozen=True)
class ShardRange:
    """``start <= fnv1a64(field) < end``; the bounds as written (kept for the echoed text)."""

    field: str
    start: str
    end: str

    def matches(self, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        key = meta.get("uid") if self.field == "object.metadata.uid" else meta.get("namespace")
        return int(self.start, 16) <= fnv1a64(str(key or "")) < int(self.end, 16)

    def __str__(self) -> str:
        return f"shardRange({self.field}, '{self.start}', '{self.end}')"


@dataclass(frozen=True)
class ShardSelector:
    """A parsed ``shardSelector``: the ranges, any of which selects an object."""

    ranges: tuple[ShardRange, ...]

    def matches(self, obj: dict[str, Any]) -> bool:
        return any(r.matches(obj) for r in self.ranges)

    @property
    def text(self) -> str:
        """The normalised selector: each range as ``shardRange(field, 'start', 'end')``, joined by `` || ``."""
        return " || ".join(str(r) for r in self.ranges)

    def info(self) -> dict[str, str]:
        """The ``shardInfo`` of a list answered with this selector."""
        return {"selector": self.text}


def echoed(custom: bool) -> bool:
    """Whether a list of this kind carries ``metadata.shardInfo``: kube-apiserver sets it on typed lists only,
    and a custom resource's list is unstructured, so it is absent there although the list is filtered."""
    return not custom


def parse(text: str) -> ShardSelector | None:
    """Parse a ``shardSelector`` parameter; None when it is absent or empty; a 500 when malformed."""
    if not text:
        return None
    parsed = _parse_cached(text)
    if isinstance(parsed, str):
        raise errors.ApiError(500, "", f"invalid shard selector: {parsed}")
    return parsed


@functools.lru_cache(maxsize=256)
def _parse_cached(text: str) -> ShardSelector | str:
    """The selector, or the reason it is refused (kube-apiserver's ``sharding.Parse`` error)."""
    text = text.strip()
    if not text:
        return "empty shard selector is not allowed; omit the parameter for unfiltered lists"
    try:
        ranges = _walk(celsyntax.parse(text))
    except CelSyntaxError as exc:
        return f"CEL parse error: {exc}"
    except _Refused as refused:
        return str(refused)
    for other in ranges[1:]:
        if other.field != ranges[0].field:
            return (f"all shard ranges must use the same field, got {go_quote(ranges[0].field)} and "
                    f"{go_quote(other.field)}")
    return ShardSelector(tuple(ranges))


class _Refused(Exception):
    """A parsed expression that is not a shard selector; the message is kube-apiserver's."""


def _walk(node: Node) -> list[ShardRange]:
    """``shardRange(...)`` calls joined by ``||``, left to right."""
    if node.kind != celsyntax.CALL:
        raise _Refused(f"unexpected expression kind {node.kind}; expected shardRange() call or || operator")
    if node.function == "_||_":
        if len(node.args) != 2:
            raise _Refused("|| operator requires exactly 2 arguments")
        return _walk(node.args[0]) + _walk(node.args[1])
    if node.function == "shardRange":
        return [_shard_range(node)]
    raise _Refused(f"unsupported function {go_quote(node.function)}; only shardRange() and || are allowed")


def _shard_range(call: Node) -> ShardRange:
    if len(call.args) != 3:
        raise _Refused(f"shardRange() requires exactly 3 arguments, got {len(call.args)}")
    path = _field_path(call.args[0])
    if path not in FIELDS:
        raise _Refused(f"unsupported field path {go_quote(path)}; supported: {', '.join(FIELDS)}")
    start = _bound(call.args[1], "hexStart")
    end = _bound(call.args[2], "hexEnd")
    if not _hex_less(start, end):
        raise _Refused(f"shard range start {start} must be less than end {end}")
    return ShardRange(path, start, end)


def _field_path(node: Node) -> str:
    if node.kind == celsyntax.IDENT:
        return node.name
    if node.kind == celsyntax.SELECT and node.operand is not None:
        return f"{_field_path(node.operand)}.{node.field_name}"
    raise _Refused("shardRange() first argument: expected field path (e.g. object.metadata.uid), "
                   f"got expression kind {node.kind}")


def _bound(node: Node, name: str) -> str:
    """A bound: a string literal ``0x`` + 16 lowercase hex digits, or 2**64 written with 17."""
    if node.kind != celsyntax.LITERAL or node.literal is None:
        raise _Refused(f"{name} must be a string literal (e.g. '0xff'), got expression kind {node.kind}")
    if node.literal.go_type != "string":
        raise _Refused(f"{name} must be a string literal, got {node.literal.go_type}")
    value = str(node.literal.value)
    if not value.startswith("0x"):
        raise _Refused(f"{name} must have '0x' prefix, got {go_quote(value)}")
    digits = value[2:]
    size = len(digits.encode())  # Go's len(): bytes
    if not digits:
        raise _Refused(f"{name}: hex value is required after '0x'")
    if size > 17:
        raise _Refused(f"{name}: hex value too long ({size} chars, max 17): {go_quote(digits)}")
    wrong = next((c for c in digits if c not in _HEX_DIGITS), None)
    if wrong is not None:
        raise _Refused(f"{name}: invalid hex character {go_quote(wrong)} in {go_quote(value)}")
    if size == 17 and value != TOP:
        raise _Refused(f"{name}: 17-digit hex value must be '{TOP}' (2^64), got {go_quote(value)}")
    if size < 16:
        padded = "0x" + "0" * (16 - size) + digits
        raise _Refused(f"{name} must be a 0x-prefixed 16-digit hex value, got {go_quote(value)} "
                       f"(did you mean {go_quote(padded)}?)")
    return value


def _hex_less(a: str, b: str) -> bool:
    """kube's ``HexLess``: the shorter text is smaller, else the lexically smaller one."""
    if len(a) != len(b):
        return len(a) < len(b)
    return a < b


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
               "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """``text`` as Go's ``%q`` writes it (``strconv.Quote``): double quotes, Go escapes for the unprintable."""
    out = []
    for char in text:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'
