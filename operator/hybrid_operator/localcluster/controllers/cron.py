"""Cron schedules as kube's CronJob controller reads them (the standard 5-field format).

Fields are minute, hour, day of month, month and day of week, each ``*``
(or ``?``), a number, a name (``jan``, ``mon``), a range ``a-b``, a step
``*/n`` or ``a-b/n``, or a comma-separated list of those; the macros
``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``
and ``@hourly`` stand for their usual expansions, and ``CRON_TZ=``/``TZ=``
prefixes are honoured.  When both day fields are restricted, a day matches
either (as in cron).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
HORIZON = timedelta(days=5 * 366)  # a schedule that never fires (Feb 30) gives up after this


class ScheduleError(ValueError):
    """The schedule is not a valid cron expression."""


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool
    zone: tzinfo

    def matches_day(self, moment: datetime) -> bool:
        by_day = moment.day in self.days
        by_weekday = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return by_day and by_weekday
        return by_day or by_weekday

    def next_after(self, moment: datetime) -> datetime | None:
        """The first time strictly after ``moment`` the schedule fires (aware, in UTC), or None."""
        current = moment.astimezone(self.zone).replace(second=0, microsecond=0) + timedelta(minutes=1)
        horizon = current + HORIZON
        while current < horizon:
            if current.month not in self.months:
                current = (current.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            elif not self.matches_day(current):
                current = current.replace(hour=0, minute=0) + timedelta(days=1)
            elif current.hour not in self.hours:
                current = current.replace(minute=0) + timedelta(hours=1)
            elif current.minute not in self.minutes:
                current += timedelta(minutes=1)
            else:
                return current.astimezone(UTC)
        return None


def _value(text: str, index: int) -> int:
    names = MONTHS if index == 3 else DAYS if index == 4 else ()
    lowered = text.lower()
    if lowered in names:
        return names.index(lowered) + (1 if index == 3 else 0)
    if not text.isdigit():
        raise ScheduleError(f"failed to parse int from {text}")
    return int(text)


def _field(text: str, index: int) -> frozenset[int]:
    low, high = BOUNDS[index]
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        step = _value(step_text, 0) if step_text else 1
        if span in ("*", "?"):
            start, end = low, high
        elif "-" in span:
            first, last = span.split("-", 1)
            start, end = _value(first, index), _value(last, index)
        else:
            start = _value(span, index)
            end = high if step_text else start
        if step < 1 or start < low or end > high or start > end:
            raise ScheduleError(f"end of range ({end}) above maximum ({high}): {part}" if end > high
                                else f"invalid range: {part}")
        values.update(range(start, end + 1, step))
    if index == 4 and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


def parse(schedule: str, time_zone: str | None = None) -> Schedule:
    """A parsed schedule; ``time_zone`` is the CronJob's ``spec.timeZone``."""
    text = schedule.strip()
    zone_name = time_zone
    if text.startswith(("CRON_TZ=", "TZ=")):
        prefix, _, text = text.partition(" ")
        zone_name = prefix.split("=", 1)[1]
    text = MACROS.get(text.strip().lower(), text.strip())
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {schedule}")
    try:
        zone: tzinfo = ZoneInfo(zone_name) if zone_name else UTC
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"unknown time zone {zone_name}") from exc
    parsed = [_field(field, index) for index, field in enumerate(fields)]
    return Schedule(parsed[0], parsed[1], parsed[2], parsed[3], parsed[4],
                    any_day=fields[2] in ("*", "?"), any_weekday=fields[4] in ("*", "?"), zone=zone)


def last_due(schedule: Schedule, since: datetime, now: datetime, limit: int = 100_000) -> datetime | None:
    """The latest time in ``(since, now]`` the schedule fires, or None (missed ones collapse into it)."""
    found = None
    moment = since
    for _ in range(limit):
        upcoming = schedule.next_after(moment)
        if upcoming is None or upcoming > now:
            return found
        found = moment = upcoming
    return found
