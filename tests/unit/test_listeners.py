"""The pure parts of the listener bounds (issue 28 item 7): the repeated-log limiter and the descriptor budget.

The bounds themselves are attacked over real sockets in ``tests/security/test_*_connections.py``.
"""

from __future__ import annotations

import logging
import resource

import pytest

from hybrid_operator import listeners

pytestmark = pytest.mark.unit


def record(message: str, error: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(error), error, None) if error is not None else None
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, None, exc_info)


def test_a_repeated_record_passes_once_per_interval_then_says_how_many_were_left_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(listeners.time, "monotonic", lambda: now[0])
    limiter = listeners.RepeatLimiter(interval=30.0)
    error = OSError(24, "Too many open files")
    first = record("socket.accept() out of system resource", error)
    assert limiter.filter(first) and first.exc_info is not None, "the first one passes whole"
    assert not any(limiter.filter(record("socket.accept() out of system resource", error)) for _ in range(500))
    assert limiter.filter(record("another message", error)), "another message is not a repeat"
    now[0] += 31.0
    later = record("socket.accept() out of system resource", error)
    assert limiter.filter(later)
    assert getattr(later, "suppressed", None) == 500
    assert later.exc_info is None and "Too many open files" in getattr(later, "error", "")


def test_the_same_message_with_another_error_type_is_not_a_repeat() -> None:
    limiter = listeners.RepeatLimiter(interval=30.0)
    assert limiter.filter(record("Error handling request", ValueError("x")))
    assert limiter.filter(record("Error handling request", KeyError("x")))
    assert not limiter.filter(record("Error handling request", ValueError("y")))


def test_the_default_cap_follows_the_descriptor_limit() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        pytest.skip("no descriptor limit")
    assert listeners.descriptor_budget() == soft - listeners.RESERVED_DESCRIPTORS
    assert listeners.ConnectionLimits(descriptor_share=0.5).cap() == (soft - listeners.RESERVED_DESCRIPTORS) // 2
    assert listeners.ConnectionLimits(max_connections=7).cap() == 7
