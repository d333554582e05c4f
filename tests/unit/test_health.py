"""Unit tests for hybrid_operator.health: what makes /readyz pass or fail, and bind addresses."""

from __future__ import annotations

import pytest

from hybrid_operator import errors
from hybrid_operator.manager.health import Readiness, parse_address
from support.fakes import FakeClock

pytestmark = pytest.mark.unit


def ready_state(clock: FakeClock) -> Readiness:
    readiness = Readiness(["Tick", "Sleep"], window=15, clock=clock)
    readiness.started = True
    readiness.alive("Tick")
    readiness.alive("Sleep")
    return readiness


def failing(readiness: Readiness) -> list[str]:
    return [name for name, ok, _ in readiness.checks() if not ok]


def test_ready_when_started_and_every_kind_is_fresh() -> None:
    readiness = ready_state(FakeClock(100.0))
    assert readiness.ready() and failing(readiness) == []


@pytest.mark.parametrize(("change", "failed"), [
    (lambda r, c: setattr(r, "started", False), ["started"]),
    (lambda r, c: setattr(r, "stopping", True), ["shutdown"]),
    (lambda r, c: r.failed("Tick", "connection refused"), ["watch-Tick"]),
    (lambda r, c: setattr(c, "now", c.now + 16), ["watch-Tick", "watch-Sleep"]),
    (lambda r, c: setattr(r, "election", lambda: False), ["leader-election"]),
    (lambda r, c: setattr(r, "election", lambda: True), []),
])
def test_what_fails_readiness(change: object, failed: list[str]) -> None:
    clock = FakeClock(100.0)
    readiness = ready_state(clock)
    change(readiness, clock)  # type: ignore[operator]
    assert failing(readiness) == failed
    assert readiness.ready() is (not failed)


def test_a_kind_recovers_with_the_next_sign_of_life() -> None:
    clock = FakeClock(100.0)
    readiness = ready_state(clock)
    clock.now += 1
    readiness.failed("Tick", "API answered 404 Not Found")
    assert ("watch-Tick", False, "API answered 404 Not Found") in readiness.checks()
    clock.now += 1
    readiness.alive("Tick")
    assert readiness.ready()


def test_a_kind_never_seen_is_not_ready() -> None:
    readiness = Readiness(["Tick"], clock=FakeClock(100.0))
    readiness.started = True
    assert readiness.checks()[-1] == ("watch-Tick", False, "not listed yet")


@pytest.mark.parametrize(("address", "parsed"), [
    (":8080", ("", 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("0", ("", None)), ("[::1]:9000", ("::1", 9000)),
])
def test_parse_address(address: str, parsed: tuple[str, int | None]) -> None:
    assert parse_address(address) == parsed


@pytest.mark.parametrize("address", ["8080", "host:", "host:port"])
def test_parse_address_refuses(address: str) -> None:
    with pytest.raises(errors.ConfigurationError, match="is not host:port"):
        parse_address(address)
