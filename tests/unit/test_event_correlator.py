"""Issue 13 item 5 (operator side): a repeated Event is counted on the Event already posted.

:class:`hybrid_operator.kube.events.EventCorrelator` is client-go's EventCorrelator bookkeeping:
the same object, type, reason and message -> the posted Event is counted again (a PATCH of count
and lastTimestamp), not copied; ten different messages of one object, type and reason within ten
minutes -> one "(combined from similar events)" Event; the last 4,096 Events are remembered.
"""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_operator.kube.events import COMBINED_PREFIX, EventCorrelator, Posted
from support.fakes import FakeClock

pytestmark = pytest.mark.unit


def event(message: str = "run succeeded: ok=3 changed=0", reason: str = "ReconcileSucceeded",
          name: str = "hello", uid: str = "u1") -> dict[str, Any]:
    return {"involvedObject": {"apiVersion": "web.example.com/v1alpha1", "kind": "Website", "namespace": "ns",
                               "name": name, "uid": uid},
            "type": "Normal", "reason": reason, "message": message, "source": {"component": "hybrid-operator"}}


def test_a_repeated_event_is_counted_on_the_one_posted() -> None:
    correlator = EventCorrelator()
    key, previous = correlator.correlate(event())
    assert previous is None
    correlator.posted(key, Posted("ns", "hello.1", 1, "t0"))
    again, previous = correlator.correlate(event())
    assert again == key and previous == Posted("ns", "hello.1", 1, "t0")


@pytest.mark.parametrize("other", [
    pytest.param(event(message="run succeeded: ok=4 changed=1"), id="another message"),
    pytest.param(event(reason="ReconcileFailed"), id="another reason"),
    pytest.param(event(name="other"), id="another object"),
    pytest.param(event(uid="u2"), id="the same name, another object (recreated)"),
])
def test_events_that_differ_are_posted_apart(other: dict[str, Any]) -> None:
    correlator = EventCorrelator()
    key, _ = correlator.correlate(event())
    correlator.posted(key, Posted("ns", "hello.1", 1, "t0"))
    assert correlator.correlate(other)[1] is None


def test_many_similar_events_are_combined_into_one() -> None:
    clock = FakeClock(0.0)
    correlator = EventCorrelator(clock=clock)
    keys = []
    for index in range(12):
        posted = event(message=f"re-created ConfigMap c{index}", reason="DriftRepaired")
        key, previous = correlator.correlate(posted)
        if previous is None:
            correlator.posted(key, Posted("ns", f"hello.{index}", 1, "t0"))
        keys.append((key, posted["message"], previous))
    assert len({key for key, _, _ in keys[:9]}) == 9, "the first nine are posted as they are"
    combined = keys[9:]
    assert all(message.startswith(COMBINED_PREFIX) for _, message, _ in combined)
    assert len({key for key, _, _ in combined}) == 1 and combined[1][2] is not None, "then one Event, counted"
    clock.now += 601
    key, previous = correlator.correlate(event(message="re-created ConfigMap c99", reason="DriftRepaired"))
    assert previous is None and not key[-1].startswith(COMBINED_PREFIX), "the window is ten minutes"


def test_an_event_gone_from_the_api_is_posted_anew() -> None:
    correlator = EventCorrelator()
    key, _ = correlator.correlate(event())
    correlator.posted(key, Posted("ns", "hello.1", 1, "t0"))
    correlator.forget(key)
    assert correlator.correlate(event())[1] is None


def test_the_memory_is_bounded() -> None:
    correlator = EventCorrelator(max_entries=3)
    for index in range(10):
        key, _ = correlator.correlate(event(name=f"o{index}"))
        correlator.posted(key, Posted("ns", f"o{index}.1", 1, "t0"))
    assert correlator.correlate(event(name="o9"))[1] is not None
    assert correlator.correlate(event(name="o0"))[1] is None
