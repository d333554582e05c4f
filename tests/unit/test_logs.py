"""The log configuration: kopf's retried requests are details of an outage, not errors."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from hybrid_operator import logs

pytestmark = pytest.mark.unit


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("kopf").level)
    stream = io.StringIO()
    yield stream
    root.handlers[:], root.level = saved[0], saved[1]
    logging.getLogger("kopf").setLevel(saved[2])


def _configure(stream: io.StringIO, level: str) -> None:
    logs.configure(level, "json")
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)


def test_a_retried_kopf_request_is_debug_and_the_escalation_an_error(captured: io.StringIO) -> None:
    _configure(captured, "info")
    api = logging.getLogger("kopf._cogs.clients.api")
    api.error("Request attempt #1/9 failed; will retry: GET https://127.0.0.1:1/api -> ClientConnectorError()")
    api.error("Request attempt #9/9 failed; escalating: GET https://127.0.0.1:1/api -> ClientConnectorError()")
    logging.getLogger("hybrid_operator.kube.client").error("Request attempt #1 failed; will retry: ours")
    lines = captured.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert '"level": "error"' in lines[0] and "escalating" in lines[0]
    assert "ours" in lines[1]


def test_with_debug_the_retried_kopf_request_shows_as_debug(captured: io.StringIO) -> None:
    _configure(captured, "debug")
    logging.getLogger("kopf._cogs.clients.api").error("Request attempt #1/9 failed; will retry: GET /api -> E()")
    lines = captured.getvalue().splitlines()
    assert len(lines) == 1 and '"level": "debug"' in lines[0], lines
