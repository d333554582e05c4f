"""Scalar strings as the Operator SDK reads them: Go durations (``1h30m``, ``500ms``) and Go booleans.

Flags, environment variables, ``watches.yaml`` and annotations all go through these two parsers, so
a value means the same wherever it is written.

``reconcilePeriod`` in ``watches.yaml``, the ``reconcile-period`` CR annotations and the
``--reconcile-period`` flag are all Go ``time.Duration`` strings, so they must be parsed exactly as
Go's ``time.ParseDuration`` does: an optional sign, then one or more ``<number><unit>`` pairs where
the number may have a fraction (``1.5h``, ``.5s``) and the unit is one of ``ns``, ``us`` (``µs``,
``μs``), ``ms``, ``s``, ``m``, ``h``. A bare ``0`` is the only number allowed without a unit.
Values are limited to Go's range (about 292 years). Python's :class:`~datetime.timedelta` has
microsecond resolution, so nanosecond parts are truncated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from fractions import Fraction
from typing import overload

from hybrid_operator.errors import PermanentError

_NANOSECONDS_PER_UNIT: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # MICRO SIGN
    "\u03bcs": 1_000,  # GREEK SMALL LETTER MU
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_MAX_NANOSECONDS = 2**63 - 1
_PART = re.compile(r"(\d+\.?\d*|\.\d+)([^\d.]*)")
EXAMPLES = '"30s", "5m", "1h30m" or "500ms"'


class DurationError(ValueError):
    """The text is not a valid Go duration; the message says why (without repeating the text)."""


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration string into a timedelta (negative durations are allowed, as in Go)."""
    if not isinstance(text, str):
        raise DurationError(f"expected a string such as {EXAMPLES}, got {type(text).__name__}")
    sign, body = _split_sign(text)
    if body == "0":
        return timedelta(0)
    if not body:
        raise DurationError(f"empty duration; use {EXAMPLES}")
    nanoseconds = sign * _body_nanoseconds(body)
    return timedelta(microseconds=int(nanoseconds / 1000))


def _split_sign(text: str) -> tuple[int, str]:
    if text[:1] in ("+", "-"):
        return (-1 if text[0] == "-" else 1), text[1:]
    return 1, text


def _body_nanoseconds(body: str) -> int:
    total = Fraction(0)
    position = 0
    while position < len(body):
        match = _PART.match(body, position)
        if match is None:
            raise DurationError(f"expected a number at {body[position:]!r}; use {EXAMPLES}")
        number, unit = match.groups()
        if not unit:
            raise DurationError(f"missing unit after {number!r}; units are ns, us, ms, s, m, h")
        if unit not in _NANOSECONDS_PER_UNIT:
            raise DurationError(f"unknown unit {unit!r}; units are ns, us, ms, s, m, h")
        total += Fraction(number) * _NANOSECONDS_PER_UNIT[unit]
        if total > _MAX_NANOSECONDS:
            raise DurationError("out of range (more than about 292 years)")
        position = match.end()
    return int(total)


def annotation_duration(annotations: Mapping[str, str], key: str, default: timedelta) -> timedelta:
    """The Go duration in annotation ``key``, else ``default``; a malformed one raises PermanentError naming it."""
    if key not in annotations:
        return default
    try:
        return parse_duration(str(annotations[key]))
    except DurationError as exc:
        raise PermanentError(f"annotation {key}: {exc}") from exc


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@overload
def parse_bool(text: object, default: bool) -> bool: ...


@overload
def parse_bool(text: object, default: None = None) -> bool | None: ...


def parse_bool(text: object, default: bool | None = None) -> bool | None:
    """Go's ``strconv.ParseBool`` (what the SDK's flags and annotations use); ``default`` when it is neither."""
    value = str(text).strip()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return default
