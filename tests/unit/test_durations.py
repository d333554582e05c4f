"""Unit tests for hybrid_operator.durations: Go duration parsing and formatting."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hybrid_operator.config.values import DurationError, parse_duration

pytestmark = pytest.mark.unit

VALID = [
    ("0", timedelta(0)),
    ("+0", timedelta(0)),
    ("-0", timedelta(0)),
    ("0s", timedelta(0)),
    ("10s", timedelta(seconds=10)),
    ("500ms", timedelta(milliseconds=500)),
    ("1h30m", timedelta(hours=1, minutes=30)),
    ("1h30m15s", timedelta(hours=1, minutes=30, seconds=15)),
    ("10h", timedelta(hours=10)),
    ("1.5h", timedelta(hours=1, minutes=30)),
    (".5s", timedelta(milliseconds=500)),
    ("5.s", timedelta(seconds=5)),
    ("-5m", timedelta(minutes=-5)),
    ("+5s", timedelta(seconds=5)),
    ("1us", timedelta(microseconds=1)),
    ("1\u00b5s", timedelta(microseconds=1)),
    ("1\u03bcs", timedelta(microseconds=1)),
    ("1500ns", timedelta(microseconds=1)),
    ("999ns", timedelta(0)),
    ("1m1m", timedelta(minutes=2)),
    ("2562047h", timedelta(hours=2562047)),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_parse_valid(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


INVALID = [
    ("", "empty duration"),
    ("-", "empty duration"),
    ("10", "missing unit"),
    ("1h10", "missing unit"),
    ("10x", "unknown unit 'x'"),
    ("10 s", "unknown unit ' s'"),
    ("1d", "unknown unit 'd'"),
    ("h", "expected a number"),
    (".s", "expected a number"),
    ("1.2.3s", "missing unit after '1.2'"),
    (" 10s", "expected a number"),
    ("3000000h", "out of range"),
]


@pytest.mark.parametrize(("text", "reason"), INVALID)
def test_parse_invalid(text: str, reason: str) -> None:
    with pytest.raises(DurationError, match=reason.replace(".", r"\.")):
        parse_duration(text)


def test_non_string_is_refused() -> None:
    with pytest.raises(DurationError, match="expected a string"):
        parse_duration(30)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(hours=1, minutes=30), "1h30m0s"),
        (timedelta(minutes=5), "5m0s"),
        (timedelta(seconds=10), "10s"),
        (timedelta(seconds=1, milliseconds=500), "1.5s"),
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(microseconds=7), "7µs"),
        (timedelta(minutes=-5), "-5m0s"),
        (timedelta(hours=10), "10h0m0s"),
    ],
)
def test_parses_what_go_prints(value: timedelta, text: str) -> None:
    assert parse_duration(text) == value
