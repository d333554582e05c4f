"""The headline `hybrid-operator up` prints per resource: what a user watching the live summary needs to see.

Why it exists: the SDK writes ``Successful=False`` when a run *starts*, so a follow-up run of a healthy
resource used to show as ``Successful=False`` until it ended; a run in progress must read ``Running``.
"""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_operator.cli.up import summarize


def cond(kind: str, status: str, reason: str, message: str = "", when: str = "t") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": when}


@pytest.mark.parametrize(("conditions", "expected"), [
    pytest.param([], ("Pending", ""), id="no status yet"),
    pytest.param([cond("Running", "True", "Running", when="t1"), cond("Successful", "False", "Running")],
                 ("Running", "t1"), id="a follow-up run in progress"),
    pytest.param([cond("Running", "True", "Successful"), cond("Successful", "True", "Successful", when="t2")],
                 ("Successful=True", "t2"), id="awaiting next reconciliation"),
    pytest.param([cond("Running", "True", "Failed"), cond("Failure", "True", "Failed", "task x failed\nmore", "t3")],
                 ("Failure: task x failed", "t3"), id="a failure names its first line"),
    pytest.param([cond("Deployed", "True", "InstallSuccessful", when="t4")], ("Deployed=True", "t4"),
                 id="a Helm release"),
])
def test_summarize_headline(conditions: list[dict[str, Any]], expected: tuple[str, str]) -> None:
    assert summarize({"status": {"conditions": conditions}}) == expected
