"""The syntax tree of a CEL expression, parsed (not compiled) as kube-apiserver's cel-go parser does.

Why this module exists: kube-apiserver parses a KEP-5866 ``shardSelector`` with cel-go's parser and
walks the tree it gets (no type check, no evaluation, no macros), and its error messages name the
tree's node kinds by cel-go's numbers. To refuse what it refuses, with the same words, the embedded
server needs the same tree. ``cel-expr-python`` (cel-cpp, the same grammar and the same parser
messages as cel-go) parses the text; its tree comes out as a serialized ``cel.expr.ParsedExpr``
protobuf, which :func:`parse` decodes here with a small reader of the protobuf wire format (the
project has no protobuf runtime, and needs only these few messages).

Two differences from cel-go are bridged: cel-cpp always expands macros (``has(x)``, ``x.all(...)``),
cel-go's parser here has none, so a node that a macro produced is given back as the call it was
written as (``has`` from a test-only select, ``all``, ``exists``, ``exists_one``, ``map`` or
``filter`` from the shape of the comprehension); and for a text with several syntax errors, cel-go's
first error is the lexer's (``token recognition error``) when there is one, while cel-cpp lists them
by position, so :func:`parse` picks that one first.
"""

from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass, field
from typing import Any

#: cel-go's ``ast.ExprKind`` numbers, which its error messages print
CALL, COMPREHENSION, IDENT, LIST, LITERAL, MAP, SELECT, STRUCT = 1, 2, 3, 4, 5, 6, 7, 8

_ERROR = re.compile(r"ERROR: <input>:\d+:\d+: (.*?)\n \|", re.S)


class CelSyntaxError(Exception):
    """The text is not CEL; the message is cel-go's first error message."""


@dataclass(frozen=True)
class Literal:
    """A constant: its value and the Go type cel-go's ``Value()`` gives it (``%T`` in messages)."""

    value: Any
    go_type: str


@dataclass
class Node:
    """One expression node, with what the shard selector walk reads of it."""

    kind: int
    function: str = ""
    args: list[Node] = field(default_factory=list)
    operand: Node | None = None
    field_name: str = ""
    name: str = ""
    literal: Literal | None = None


def parse(text: str) -> Node:
    """The parsed tree of ``text`` (no macros); :class:`CelSyntaxError` when it does not parse."""
    try:
        serialized = _env().compile(text, disable_check=True).serialize()
    except RuntimeError as exc:
        raise CelSyntaxError(_first_error(str(exc))) from exc
    parsed = _fields(_first(_fields(serialized), 2, b""))  # google.protobuf.Any: the ParsedExpr in value
    return _node(_first(parsed, 2, b""))


@functools.cache
def _env() -> Any:
    from cel_expr_python import cel

    return cel.NewEnv(variables={})


def _first_error(report: str) -> str:
    messages = _ERROR.findall(report)
    if not messages:
        return report.strip()
    lexer = [m for m in messages if m.startswith("Syntax error: token recognition error")]
    return str((lexer or messages)[0])


# -- the protobuf wire format (varint, 64-bit, length-delimited, 32-bit) ------------------------------


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> dict[int, list[Any]]:
    """Every field of one message: number -> values in order (ints, 8-byte or 4-byte raw, or bytes)."""
    found: dict[int, list[Any]] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at:at + size], at + size
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        else:
            raise ValueError(f"protobuf wire type {wire} is not expected in a ParsedExpr")
        found.setdefault(number, []).append(value)
    return found


def _first(fields: dict[int, list[Any]], number: int, default: Any) -> Any:
    values = fields.get(number)
    return values[0] if values else default


def _node(data: bytes) -> Node:
    """A ``cel.expr.Expr``: id 2, const 3, ident 4, select 5, call 6, list 7, struct 8, comprehension 9."""
    expr = _fields(data)
    if 6 in expr:
        call = _fields(expr[6][0])
        return Node(CALL, function=_first(call, 2, b"").decode(), args=[_node(arg) for arg in call.get(3, [])])
    if 5 in expr:
        select = _fields(expr[5][0])
        if _first(select, 3, 0):
            return Node(CALL, function="has")  # has(a.b): a test-only select
        return Node(SELECT, operand=_node(_first(select, 1, b"")), field_name=_first(select, 2, b"").decode())
    if 4 in expr:
        return Node(IDENT, name=_first(_fields(expr[4][0]), 1, b"").decode())
    if 3 in expr:
        return Node(LITERAL, literal=_constant(_fields(expr[3][0])))
    if 7 in expr:
        return Node(LIST)
    if 8 in expr:
        return Node(STRUCT if _first(_fields(expr[8][0]), 1, b"") else MAP)
    if 9 in expr:
        return Node(CALL, function=_macro(_fields(expr[9][0])))
    return Node(0)


def _call(data: bytes) -> tuple[str, list[bytes]]:
    """The function and arguments of a call expression (("", []) for another kind)."""
    call = _fields(_first(_fields(data), 6, b""))
    return _first(call, 2, b"").decode(), list(call.get(3, []))


def _macro(comprehension: dict[int, list[Any]]) -> str:
    """Which macro wrote this comprehension (iter_var 1, loop_step 6, result 7), from its steps."""
    step, args = _call(_first(comprehension, 6, b""))
    if step == "_&&_":
        return "all"
    if step == "_||_":
        return "exists"
    if _call(_first(comprehension, 7, b""))[0] == "_==_":
        return "exists_one"
    if step == "_?_:_" and len(args) == 3:
        # filter(x, p) steps with p ? @result + [x] : @result; map(x, p, e) with [e]
        _, added = _call(args[1])
        elements = _fields(_first(_fields(added[1]), 7, b"")).get(1, []) if len(added) == 2 else []
        item = _fields(_first(_fields(elements[0]), 4, b"")) if elements else {}
        return "filter" if _first(item, 1, None) == _first(comprehension, 1, b"") else "map"
    return "map"


def _constant(constant: dict[int, list[Any]]) -> Literal:
    """A ``cel.expr.Constant``: null 1, bool 2, int64 3, uint64 4, double 5, string 6, bytes 7."""
    if 6 in constant:
        return Literal(constant[6][0].decode(), "string")
    if 7 in constant:
        return Literal(constant[7][0], "[]uint8")
    if 2 in constant:
        return Literal(bool(constant[2][0]), "bool")
    if 3 in constant:
        return Literal(constant[3][0] - (1 << 64) if constant[3][0] >= 1 << 63 else constant[3][0], "int64")
    if 4 in constant:
        return Literal(constant[4][0], "uint64")
    if 5 in constant:
        return Literal(struct.unpack("<d", constant[5][0])[0], "float64")
    return Literal(None, "structpb.NullValue")
