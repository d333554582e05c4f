"""Cron schedules of the embedded cluster's CronJob controller (controllers/cron.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hybrid_operator.localcluster.controllers import cron

pytestmark = pytest.mark.unit


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(("schedule", "after", "expected"), [
    ("*/1 * * * *", "2026-03-01T10:00:30", "2026-03-01T10:01:00"),
    ("*/15 * * * *", "2026-03-01T10:16:00", "2026-03-01T10:30:00"),
    ("0 3 * * *", "2026-03-01T10:00:00", "2026-03-02T03:00:00"),
    ("@hourly", "2026-03-01T10:00:00", "2026-03-01T11:00:00"),
    ("0 0 1 jan *", "2026-03-01T10:00:00", "2027-01-01T00:00:00"),
    ("30 9 * * mon-fri", "2026-03-07T10:00:00", "2026-03-09T09:30:00"),  # Saturday -> Monday
    ("0 0 13 * 5", "2026-03-01T00:00:00", "2026-03-06T00:00:00"),  # day 13 OR a Friday
    ("0 12 * * 7", "2026-03-01T13:00:00", "2026-03-08T12:00:00"),  # 7 is Sunday too
    ("CRON_TZ=Europe/Paris 0 9 * * *", "2026-03-01T00:00:00", "2026-03-01T08:00:00"),
])
def test_next_after(schedule: str, after: str, expected: str) -> None:
    assert cron.parse(schedule).next_after(at(after)) == at(expected)


@pytest.mark.parametrize("schedule", ["* * * *", "61 * * * *", "*/0 * * * *", "x * * * *", "5-1 * * * *"])
def test_invalid_schedules_are_rejected(schedule: str) -> None:
    with pytest.raises(cron.ScheduleError):
        cron.parse(schedule)


def test_last_due_collapses_missed_runs_into_the_latest() -> None:
    schedule = cron.parse("*/5 * * * *")
    assert cron.last_due(schedule, at("2026-03-01T10:00:00"), at("2026-03-01T10:17:10")) == at("2026-03-01T10:15:00")
    assert cron.last_due(schedule, at("2026-03-01T10:15:00"), at("2026-03-01T10:19:59")) is None


def test_a_day_that_never_comes_gives_up() -> None:
    assert cron.parse("0 0 30 feb *").next_after(at("2026-03-01T00:00:00")) is None
