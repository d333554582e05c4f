"""The one clock of the operator: "now" in UTC, and the RFC 3339 text Kubernetes writes.

Status conditions, Events, Leases and artifact names all stamp times; reading the time in one place
keeps their formats equal and lets tests see every stamp come from the same source.
"""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def micro_time(moment: datetime | None = None) -> str:
    """``moment`` (default: now) as a ``metav1.MicroTime`` (Leases, ``events.k8s.io`` Events)."""
    moment = now() if moment is None else moment
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(moment: datetime | None = None) -> str:
    """``moment`` (default: now) as Kubernetes renders a ``metav1.Time``: UTC, whole seconds."""
    moment = now() if moment is None else moment
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
