"""Annotations cannot lift the operator's bounds (docs/security.md, "Helm releases and annotation limits").

Issue 28 item 9: ``max-runner-artifacts: "0"`` (keep every run) with ``reconcile-period: 1ms`` gave one
resource 188 run directories (20 MB) in two and a half minutes. The attacker only creates a custom
resource with those two annotations; a real ``hybrid-operator run`` reconciles it with a real
``ansible-playbook``. Within the test's window the resource gets at most one run a second (the
period's floor) and keeps at most the watch's ``maxRunnerArtifacts`` run directories (the
artifacts' ceiling), and a Warning Event says what was changed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import artifacts
from hybrid_operator.config.model import GroupVersionKind
from support.attacker import SECURITY_GROUP, Operator, write_project
from support.cluster import Cluster
from support.operator import apply, install_open_crd, wait_for

pytestmark = [pytest.mark.security]

KIND = "Busy"
GVK = GroupVersionKind(SECURITY_GROUP, "v1", KIND)
KEEP = 3  # the watch's maxRunnerArtifacts: the most an annotation may keep
WINDOW = 20.0  # seconds of the attack
PREFIX = "ansible.sdk.operatorframework.io/"
WATCHES = f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: {KIND}
  playbook: playbooks/busy.yml
  maxRunnerArtifacts: {KEEP}
"""
PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: A run that does little
      ansible.builtin.debug:
        msg: reconciled
"""


@pytest.fixture(scope="module")
def cluster(shared_cluster: Cluster) -> Cluster:
    install_open_crd(shared_cluster, KIND, SECURITY_GROUP)
    return shared_cluster


@pytest.fixture
def operator(cluster: Cluster, tmp_path: Path) -> Iterator[Operator]:
    watches = write_project(tmp_path / "project", {"watches.yaml": WATCHES, "playbooks/busy.yml": PLAYBOOK})
    process = Operator(cluster, watches, tmp_path, tmp_path / "runner")
    try:
        yield process
    finally:
        process.stop()


def run_directories(operator: Operator, name: str) -> int:
    directory = artifacts.artifacts_dir(operator.artifacts, GVK, "default", name)
    try:
        return sum(1 for entry in directory.iterdir() if entry.is_dir())
    except OSError:
        return 0


def events(cluster: Cluster, name: str, reason: str) -> list[dict[str, Any]]:
    listing = cluster.get_json("events", "--field-selector", f"involvedObject.name={name}")
    return [event for event in listing["items"] if event.get("reason") == reason]


def test_zero_artifacts_and_a_millisecond_period_stay_bounded(cluster: Cluster, operator: Operator) -> None:
    name = "busy-bee"
    apply(cluster, {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": KIND,
                    "metadata": {"name": name, "namespace": "default",
                                 "annotations": {PREFIX + "max-runner-artifacts": "0",
                                                 PREFIX + "reconcile-period": "1ms"}},
                    "spec": {}})
    wait_for(lambda: operator.runs(name), f"the first run of {name}")
    started = time.monotonic()
    most = 0
    while time.monotonic() - started < WINDOW:
        most = max(most, run_directories(operator, name))
        time.sleep(0.2)
    runs = len(operator.runs(name))
    assert most <= KEEP + 1, f"{most} run directories kept at once (the watch keeps {KEEP}; one may be running)"
    assert runs <= WINDOW / 1.0 + 2, f"{runs} runs in {WINDOW:.0f}s: the period's floor is one second"
    told = wait_for(lambda: events(cluster, name, "AnnotationOutOfRange"), "a Warning Event about the annotations")
    assert told[0]["type"] == "Warning"
    assert "reconcile-period: 1ms is out of range, 1s is used" in told[0]["message"]
    assert f"max-runner-artifacts: 0 is out of range, {KEEP} is used" in told[0]["message"]
