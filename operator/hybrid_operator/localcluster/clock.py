"""Time as the embedded API server shows it: the one clock, RFC 3339 timestamps, ages.

Every timestamp the server writes (``creationTimestamp``, ``deletionTimestamp``,
managedFields times, conditions, audit entries, certificate validity) comes
from :func:`now`, and every age a Table prints from :func:`human_duration`, so
there is exactly one place where the package reads the wall clock.  Watch
deadlines measure elapsed time with ``time.monotonic`` instead, as timeouts
should.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


def now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    """``moment`` the way Kubernetes writes a ``metav1.Time``: UTC, whole seconds (``2026-11-30T10:00:00Z``)."""
    return moment.astimezone(UTC).strftime(RFC3339)


def now_rfc3339() -> str:
    """:func:`now` as an RFC 3339 timestamp."""
    return rfc3339(now())


def parse_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime, or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def human_duration(seconds: float) -> str:
    """A duration the way kubectl and kube-apiserver print ages (``5s``, ``3m10s``, ``2d``)."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        return _two_units(minutes, "m", whole % 60, "s")
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        return _two_units(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return _two_units(days, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return _two_units(days // 365, "y", days % 365, "d")
    return f"{days // 365}y"


def _two_units(major: int, major_unit: str, minor: int, minor_unit: str) -> str:
    return f"{major}{major_unit}" if minor == 0 else f"{major}{major_unit}{minor}{minor_unit}"


def since(value: Any, moment: datetime) -> str:
    """The age at ``moment`` of the timestamp ``value`` (``<unknown>`` when it is not one)."""
    stamp = parse_timestamp(value)
    if stamp is None:
        return "<unknown>"
    return human_duration((moment - stamp).total_seconds())
