"""The embedded cluster's housekeeping ticker: it ticks, survives an expected failure, and stops cleanly."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time

import pytest

from hybrid_operator.localcluster.periodic import Periodic

pytestmark = pytest.mark.unit


async def test_a_step_that_fails_as_expected_is_logged_and_the_ticks_go_on(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")

    ticker = Periodic("checkpoints", step, 0.01, failures=(sqlite3.Error,))
    with caplog.at_level(logging.WARNING, logger="hybrid_operator.localcluster.periodic"):
        ticker.start()
        for _ in range(500):  # three ticks of 10 ms; a loaded machine may take longer than 0.1 s
            if len(calls) >= 3:
                break
            await asyncio.sleep(0.01)
        await ticker.stop()
    assert len(calls) >= 3
    assert [(r.getMessage(), getattr(r, "task", None)) for r in caplog.records] == [
        ("periodic step failed", "checkpoints")]
    stopped = len(calls)
    await asyncio.sleep(0.05)
    assert len(calls) == stopped, "no tick after stop"


async def test_stop_waits_for_the_step_in_flight_in_its_thread() -> None:
    started, finished = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        time.sleep(0.2)
        finished.set()

    ticker = Periodic("slow", slow, 10.0, in_thread=True)
    ticker.start()
    await asyncio.to_thread(started.wait, 5)
    await ticker.stop()
    assert finished.is_set(), "what the step uses may be closed right after stop()"
