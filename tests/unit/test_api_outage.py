"""Issue 13 item 7: while the API server is unreachable, no "reconcile crashed" tracebacks.

A reconcile that fails because the API went away (or on any other :class:`TemporaryError`) is
retried after the error's delay, logged as one line without a traceback -- and not at all for an
outage, which the client logs once when it starts and once when it ends.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hybrid_operator import errors
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind
from hybrid_operator.controller.controller import Controller
from hybrid_operator.controller.reconcile import Outcome
from hybrid_operator.kube.client import Outage
from support.fakes import FakeClock, FakeReconciler

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("web.example.com", "v1alpha1", "Website")
BODY = {"apiVersion": GVK.api_version, "kind": GVK.kind,
        "metadata": {"name": "hello", "namespace": "ns", "generation": 1}}


async def test_an_outage_mid_reconcile_is_retried_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(start=0.0)
    outage = errors.Unreachable("API server unreachable (PATCH /apis/...): ConnectionRefusedError", delay=2)
    reconciler = FakeReconciler(outage, outage, default=Outcome(), clock=clock)
    controller = Controller(watch=AnsibleWatch(gvk=GVK, playbook=Path("/nowhere.yml")), reconciler=reconciler,
                            workers=1, clock=clock)
    controller.start()
    try:
        with caplog.at_level(logging.INFO):
            await controller.on_event("ADDED", BODY)
            await clock.advance(10)
    finally:
        await controller.close()
    assert reconciler.times == [0.0, 2.0, 4.0], "retried after the error's delay, then done"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], \
        [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not any(r.exc_info for r in caplog.records)


async def test_another_temporary_error_is_one_warning_line(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(start=0.0)
    conflict = errors.TemporaryError("could not update the finalizers of Website ns/hello: it kept changing")
    reconciler = FakeReconciler(conflict, default=Outcome(), clock=clock)
    controller = Controller(watch=AnsibleWatch(gvk=GVK, playbook=Path("/nowhere.yml")), reconciler=reconciler,
                            workers=1, clock=clock)
    controller.start()
    try:
        with caplog.at_level(logging.WARNING):
            await controller.on_event("ADDED", BODY)
            await clock.advance(10)
    finally:
        await controller.close()
    assert [r.getMessage() for r in caplog.records] == ["reconcile deferred"]
    assert caplog.records[0].exc_info is None


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage("https://127.0.0.1:6443")
    with caplog.at_level(logging.INFO, logger="hybrid_operator.kube.client"):
        outage.answered()
        for _ in range(29):
            outage.failed("ConnectionRefusedError: [Errno 111] Connection refused")
        assert outage.ongoing
        for _ in range(5):
            outage.answered()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == \
        [("WARNING", "API server unreachable"), ("INFO", "API server reachable again")]
