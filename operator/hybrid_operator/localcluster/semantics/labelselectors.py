"""Label selectors, parsed and matched the way kube-apiserver does.

LIST, WATCH and DELETE collection accept a ``labelSelector`` query parameter
(``app=web,tier in (a,b),!legacy``); kubectl, helm and the operator's own
watches depend on it filtering exactly like a real cluster, and on bad input
failing with kube-apiserver's wording (a 400 :class:`~..errors.ApiError`).
The parser mirrors ``labels.Parse``: a lexer, then recursive descent, then
each requirement validated like ``labels.NewRequirement``.  metav1.LabelSelector
objects (``matchLabels``/``matchExpressions``) convert to the same
:class:`LabelSelector`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from hybrid_operator.localcluster import errors

# --------------------------------------------------------------------------- label keys and values

_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(f"^{_NAME_FMT}$")
_VALUE_RE = re.compile(f"^({_NAME_FMT})?$")
_SUBDOMAIN_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_NAME_MAX = 63
_PREFIX_MAX = 253

_NAME_HELP = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_NAME_FMT}')"
)
_VALUE_HELP = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    f"'12345', regex used for validation is '({_NAME_FMT})?')"
)
_SUBDOMAIN_HELP = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    f"validation is '{_SUBDOMAIN_FMT}')"
)


def qualified_name_problems(key: str) -> list[str]:
    """Why ``key`` is not a valid label key (``[prefix/]name``); empty when it is."""
    parts = key.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {_NAME_HELP} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    problems: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        elif len(prefix) > _PREFIX_MAX:
            problems.append(f"prefix part must be no more than {_PREFIX_MAX} characters")
        elif not _SUBDOMAIN_RE.match(prefix):
            problems.append(f"prefix part {_SUBDOMAIN_HELP}")
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > _NAME_MAX:
        problems.append(f"name part must be no more than {_NAME_MAX} characters")
    elif not _NAME_RE.match(name):
        problems.append(f"name part {_NAME_HELP}")
    return problems


def label_value_problems(value: str) -> list[str]:
    """Why ``value`` is not a valid label value; empty when it is."""
    problems: list[str] = []
    if len(value) > _NAME_MAX:
        problems.append(f"must be no more than {_NAME_MAX} characters")
    if not _VALUE_RE.match(value):
        problems.append(_VALUE_HELP)
    return problems


def _invalid(path: str, value: str, problems: list[str]) -> str:
    return f'{path}: Invalid value: "{value}": {"; ".join(problems)}'


# --------------------------------------------------------------------------- label requirements


class Operator(Enum):
    """A label requirement's operator; the value is its canonical spelling."""

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SINGLE_VALUE = {Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS}
_SET_OPERATORS = {Operator.IN, Operator.NOT_IN}
_UNARY = {Operator.EXISTS, Operator.DOES_NOT_EXIST}
_NUMERIC = {Operator.GREATER_THAN, Operator.LESS_THAN}


@dataclass(frozen=True)
class Requirement:
    """One ``key <op> values`` term; ``values`` is sorted and de-duplicated."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator in _UNARY:
            return present == (self.operator is Operator.EXISTS)
        if self.operator in _NUMERIC:
            return present and _compare_numeric(labels[self.key], self.operator, self.values[0])
        inside = present and labels[self.key] in self.values
        if self.operator in (Operator.NOT_EQUALS, Operator.NOT_IN):
            return not inside
        return inside

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        if op in _SET_OPERATORS:
            return f"{self.key} {op.value} ({','.join(self.values)})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{self.values[0]}"


def _compare_numeric(label: str, op: Operator, bound: str) -> bool:
    try:
        actual = int(label)
    except ValueError:
        return False
    return actual > int(bound) if op is Operator.GREATER_THAN else actual < int(bound)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _make_requirement(key: str, operator: Operator, values: list[str] | tuple[str, ...]) -> Requirement:
    """Validate a requirement like labels.NewRequirement; raises _RequirementError on failure."""
    problems = qualified_name_problems(key)
    if problems:
        raise _RequirementError(_invalid("key", key, problems))
    shown = "[" + ", ".join(f'"{v}"' for v in values) + "]"
    if operator in _SET_OPERATORS and not values:
        raise _RequirementError(
            f"values: Invalid value: {shown}: for 'in', 'notin' operators, values set can't be empty"
        )
    if operator in _SINGLE_VALUE and len(values) != 1:
        raise _RequirementError(
            f"values: Invalid value: {shown}: exact-match compatibility requires one single value"
        )
    if operator in _UNARY and values:
        raise _RequirementError(
            f"values: Invalid value: {shown}: values set must be empty for exists and does not exist"
        )
    if operator in _NUMERIC:
        if len(values) != 1:
            raise _RequirementError(
                f"values: Invalid value: {shown}: for 'Gt', 'Lt' operators, exactly one value is required"
            )
        if not _is_int(values[0]):
            raise _RequirementError(
                _invalid("values[0]", values[0], ["for 'Gt', 'Lt' operators, the value must be an integer"])
            )
    for index, value in enumerate(values):
        value_problems = label_value_problems(value)
        if value_problems:
            raise _RequirementError(_invalid(f"values[{index}][{key}]", value, value_problems))
    return Requirement(key, operator, tuple(sorted(set(values))))


class _RequirementError(Exception):
    """A requirement that does not validate; the parser turns it into a 400."""


# --------------------------------------------------------------------------- LabelSelector


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of label requirements; no requirements selects everything."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    """True for a null metav1.LabelSelector, which selects no object at all."""

    @property
    def empty(self) -> bool:
        """Whether this selects every object."""
        return not self.requirements and not self.nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        present = labels or {}
        return all(r.matches(present) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


EVERYTHING_LABELS = LabelSelector()
NOTHING_LABELS = LabelSelector(nothing=True)


def _selector_of(requirements: list[Requirement]) -> LabelSelector:
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


# --------------------------------------------------------------------------- label selector lexer


class _Tok(Enum):
    IDENT = "identifier"
    END = "end of string"
    COMMA = ","
    LPAREN = "("
    RPAREN = ")"
    NOT = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    GREATER = ">"
    LESS = "<"
    IN = "in"
    NOT_IN = "notin"


_SYMBOLS = {
    ",": _Tok.COMMA,
    "(": _Tok.LPAREN,
    ")": _Tok.RPAREN,
    "!": _Tok.NOT,
    "=": _Tok.EQUALS,
    "==": _Tok.DOUBLE_EQUALS,
    "!=": _Tok.NOT_EQUALS,
    ">": _Tok.GREATER,
    "<": _Tok.LESS,
}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_KEYWORDS = {"in": _Tok.IN, "notin": _Tok.NOT_IN}
_OPERATOR_TOKENS = {
    _Tok.EQUALS: Operator.EQUALS,
    _Tok.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Tok.NOT_EQUALS: Operator.NOT_EQUALS,
    _Tok.IN: Operator.IN,
    _Tok.NOT_IN: Operator.NOT_IN,
    _Tok.GREATER: Operator.GREATER_THAN,
    _Tok.LESS: Operator.LESS_THAN,
}
_OPERATOR_LIST = "in, notin, =, ==, !=, gt, lt"


def _lex(text: str) -> list[tuple[_Tok, str]]:
    tokens: list[tuple[_Tok, str]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text):
            tokens.append((_Tok.END, ""))
            return tokens
        if text[pos] in _SPECIAL:
            literal = _longest_symbol(text, pos)
            tokens.append((_SYMBOLS[literal], literal))
        else:
            end = pos
            while end < len(text) and text[end] not in _SPECIAL and text[end] not in _WHITESPACE:
                end += 1
            literal = text[pos:end]
            tokens.append((_KEYWORDS.get(literal, _Tok.IDENT), literal))
        pos += len(literal)


def _longest_symbol(text: str, pos: int) -> str:
    """The longest run of special characters starting at ``pos`` that is a token."""
    best = text[pos]
    end = pos + 1
    while end < len(text) and text[end] in _SPECIAL:
        candidate = text[pos : end + 1]
        if candidate not in _SYMBOLS:
            break
        best = candidate
        end += 1
    return best


# --------------------------------------------------------------------------- label selector parser


class _Parser:
    """Recursive-descent parser over the token list, mirroring labels.Parse."""

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[_Tok, str]:
        return self._as(self.tokens[self.pos], values)

    def take(self, values: bool = True) -> tuple[_Tok, str]:
        token = self.tokens[self.pos]
        if self.pos < len(self.tokens) - 1:
            self.pos += 1
        return self._as(token, values)

    @staticmethod
    def _as(token: tuple[_Tok, str], values: bool) -> tuple[_Tok, str]:
        """In value position the keywords ``in`` and ``notin`` are plain identifiers."""
        if values and token[0] in (_Tok.IN, _Tok.NOT_IN):
            return _Tok.IDENT, token[1]
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, literal = self.peek()
            if tok is _Tok.END:
                return requirements
            if tok not in (_Tok.IDENT, _Tok.NOT):
                raise _ParseError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except _RequirementError as exc:
                raise _ParseError(f"unable to parse requirement: {exc}") from None
            tok, literal = self.take()
            if tok is _Tok.END:
                return requirements
            if tok is not _Tok.COMMA:
                raise _ParseError(f"found '{literal}', expected: ',' or 'end of string'")
            next_tok, next_literal = self.peek()
            if next_tok not in (_Tok.IDENT, _Tok.NOT):
                raise _ParseError(f"found '{next_literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        key, unary = self.key_and_unary_operator()
        if unary is not None:
            return _make_requirement(key, unary, ())
        tok, literal = self.take(values=False)
        operator = _OPERATOR_TOKENS.get(tok)
        if operator is None:
            raise _RequirementError(f"found '{literal}', expected: {_OPERATOR_LIST}")
        values = self.set_values() if operator in _SET_OPERATORS else self.exact_value()
        return _make_requirement(key, operator, values)

    def key_and_unary_operator(self) -> tuple[str, Operator | None]:
        tok, literal = self.take()
        negated = tok is _Tok.NOT
        if negated:
            tok, literal = self.take()
        if tok is not _Tok.IDENT:
            raise _RequirementError(f"found '{literal}', expected: identifier")
        problems = qualified_name_problems(literal)
        if problems:
            raise _RequirementError(_invalid("key", literal, problems))
        following, _ = self.peek()
        if negated:
            return literal, Operator.DOES_NOT_EXIST
        if following in (_Tok.END, _Tok.COMMA):
            return literal, Operator.EXISTS
        return literal, None

    def exact_value(self) -> list[str]:
        tok, _ = self.peek()
        if tok in (_Tok.END, _Tok.COMMA):
            return [""]
        tok, literal = self.take()
        if tok is not _Tok.IDENT:
            raise _RequirementError(f"found '{literal}', expected: identifier")
        return [literal]

    def set_values(self) -> list[str]:
        tok, literal = self.take()
        if tok is not _Tok.LPAREN:
            raise _RequirementError(f"found '{literal}' expected: '('")
        tok, literal = self.peek()
        if tok is _Tok.RPAREN:
            self.take()
            return [""]
        if tok not in (_Tok.IDENT, _Tok.COMMA):
            raise _RequirementError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self.identifier_list()
        tok, literal = self.take()
        if tok is not _Tok.RPAREN:
            raise _RequirementError(f"found '{literal}', expected: ')'")
        return values

    def identifier_list(self) -> list[str]:
        """Identifiers separated by commas; empty slots (``(,a)``, ``(a,)``) mean ``""``."""
        values: list[str] = []
        expect_value = True
        while True:
            tok, literal = self.peek()
            if tok is _Tok.IDENT and expect_value:
                values.append(self.take()[1])
                expect_value = False
                continue
            if tok is _Tok.COMMA:
                self.take()
                if expect_value:
                    values.append("")
                expect_value = True
                continue
            if tok is _Tok.RPAREN:
                if expect_value:
                    values.append("")
                return values
            expected = "',', or identifier" if expect_value else "',' or ')'"
            raise _RequirementError(f"found '{literal}', expected: {expected}")


class _ParseError(Exception):
    """A selector that does not parse; turned into a 400 by the public functions."""


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a ``labelSelector`` query parameter; an empty string selects everything."""
    try:
        requirements = _Parser(text).parse()
    except _ParseError as exc:
        raise errors.bad_request(str(exc)) from None
    return _selector_of(requirements) if requirements else EVERYTHING_LABELS


_OBJECT_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def from_label_selector_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a metav1.LabelSelector dict; ``None`` selects nothing, ``{}`` everything."""
    if selector is None:
        return NOTHING_LABELS
    requirements: list[Requirement] = []
    try:
        for key, value in sorted((selector.get("matchLabels") or {}).items()):
            requirements.append(_make_requirement(str(key), Operator.EQUALS, [str(value)]))
        for expression in selector.get("matchExpressions") or []:
            requirements.append(_expression_requirement(expression))
    except _RequirementError as exc:
        raise errors.bad_request(f"invalid label selector: {exc}") from None
    return _selector_of(requirements) if requirements else EVERYTHING_LABELS


def _expression_requirement(expression: Mapping[str, Any]) -> Requirement:
    name = str(expression.get("operator", ""))
    operator = _OBJECT_OPERATORS.get(name)
    if operator is None:
        raise _RequirementError(f'"{name}" is not a valid label selector operator')
    values = [str(v) for v in expression.get("values") or []]
    return _make_requirement(str(expression.get("key", "")), operator, values)
