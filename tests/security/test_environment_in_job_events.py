"""The operator's environment never reaches the job events, whatever a facts module is called.

Issue 28 item 6: ansible-runner removes ``ansible_facts.ansible_env`` from a task result only when
the task's action is spelled ``setup`` or ``gather_facts``. An ``ansible.builtin.setup`` task put
the operator's ``MY_SECRET_TOKEN`` into ``job_events``. A real ``hybrid-operator run`` (cold and
warm runner) with that secret in its environment reconciles a CR whose playbook gathers facts under
every name: ``ansible.builtin.setup``, ``ansible.legacy.setup``, ``ansible.builtin.gather_facts``,
``ansible.legacy.gather_facts``, a collection's redirect to ``ansible.builtin.setup``, ``setup`` in a
loop, ``action:`` with a FQCN. The run's output goes to the operator's log (``ANSIBLE_DEBUG_LOGS``,
verbosity 1 prints each result). While the run waits at a gate and after it ended, no file under the
artifacts directory, no line of the log, and neither the CR nor its Events hold the secret -- while
the play itself still sees ``ansible_env`` (the facts are only left out of what is shown and stored).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import artifacts
from hybrid_operator.config.model import GroupVersionKind
from support.attacker import SECRET_NAME, SECURITY_GROUP, StartOperator, files_containing, write_project
from support.cluster import Cluster
from support.operator import apply, condition, get_or_none, open_crd, wait_for

pytestmark = [pytest.mark.security, pytest.mark.e2e, pytest.mark.slow]

KIND = "FactsNames"
PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: FQCN setup
      ansible.builtin.setup:
    - name: legacy setup, environment only
      ansible.legacy.setup:
        gather_subset: [env]
    - name: FQCN gather_facts
      ansible.builtin.gather_facts:
    - name: legacy gather_facts
      ansible.legacy.gather_facts:
    - name: A collection's redirect to ansible.builtin.setup
      secsec.facts.gather_env:
        gather_subset: [env]
    - name: setup in a loop
      ansible.builtin.setup:
        gather_subset: "{{ item }}"
      loop: [[env], [min]]
    - name: action with a FQCN
      action: ansible.builtin.setup gather_subset=env
    - name: The play still sees the environment
      ansible.builtin.assert:
        that: ansible_env.MY_SECRET_TOKEN | length > 0
        quiet: true
      no_log: true
    - name: Wait for the gate
      ansible.builtin.wait_for:
        path: "{{ gate_file }}"
        timeout: 300
"""
RUNTIME = """\
requires_ansible: ">=2.15"
plugin_routing:
  modules:
    gather_env:
      redirect: ansible.builtin.setup
"""
GALAXY = "namespace: secsec\nname: facts\nversion: 1.0.0\nreadme: README.md\nauthors: [security tests]\n"
NAMES = ("FQCN setup", "legacy setup, environment only", "FQCN gather_facts", "legacy gather_facts",
         "A collection's redirect to ansible.builtin.setup", "setup in a loop", "action with a FQCN")


def project(workdir: Path, gate: Path) -> Path:
    watches = f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: {KIND}
  playbook: playbooks/facts.yml
  vars:
    gate_file: {gate}
"""
    return write_project(workdir / "project", {
        "watches.yaml": watches, "playbooks/facts.yml": PLAYBOOK,
        "collections/ansible_collections/secsec/facts/galaxy.yml": GALAXY,
        "collections/ansible_collections/secsec/facts/README.md": "Test collection.\n",
        "collections/ansible_collections/secsec/facts/meta/runtime.yml": RUNTIME,
    })


def run_dir_at_gate(artifacts_root: Path, name: str) -> Path:
    directory = artifacts.artifacts_dir(artifacts_root, GroupVersionKind(SECURITY_GROUP, "v1", KIND), "default", name)

    def waiting() -> Path | None:
        for run in sorted(directory.glob("*")):
            for event in (run / "job_events").glob("*.json"):
                text = event.read_text(errors="replace")
                if "Wait for the gate" in text and "playbook_on_task_start" in text:
                    return run
        return None

    found: Path = wait_for(waiting, f"the run of {name} to wait at the gate", timeout=180)
    return found


def facts_results(run: Path) -> dict[str, list[dict[str, Any]]]:
    """The ``runner_on_ok`` results of the facts tasks, by task name."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in (run / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_item_on_ok") and data.get("task") in NAMES:
            found.setdefault(str(data["task"]), []).append(data.get("res") or {})
    return found


@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_environment_never_reaches_events_logs_or_status(shared_cluster: Cluster, start_operator: StartOperator,
                                                        tmp_path: Path, mode: str) -> None:
    apply(shared_cluster, open_crd(KIND, SECURITY_GROUP))
    shared_cluster.kubectl("wait", "--for=condition=Established", f"crd/{KIND.lower()}s.{SECURITY_GROUP}")
    gate = tmp_path / "gate"
    secret = f"s3cr3t-{secrets.token_hex(12)}"
    watches = project(tmp_path, gate)
    runner_dir = tmp_path / "runner"
    operator = start_operator(shared_cluster, watches, runner_dir, env={
        SECRET_NAME: secret, "ANSIBLE_DEBUG_LOGS": "true", "HYBRID_OPERATOR_ANSIBLE_RUNNER": mode,
        "ANSIBLE_COLLECTIONS_PATH": str(watches.parent / "collections")})
    name = f"facts-{mode}"
    apply(shared_cluster, {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": KIND,
                           "metadata": {"name": name, "namespace": "default",
                                        "annotations": {"ansible.sdk.operatorframework.io/verbosity": "1"}},
                           "spec": {"size": 1}})

    def succeeded() -> dict[str, Any] | None:
        obj = get_or_none(shared_cluster, KIND.lower(), name)
        found = condition(obj, "Successful") if obj else None
        return obj if found and found["status"] == "True" else None

    try:
        try:
            run = run_dir_at_gate(runner_dir, name)
            # mid-run: every facts task has reported, the run waits
            assert files_containing(runner_dir, secret.encode()) == []
        finally:
            gate.touch()
        obj = wait_for(succeeded, f"{name} to succeed", timeout=180)
        results = facts_results(run)
        assert set(results) == set(NAMES), sorted(results)
        for task, found in results.items():  # facts were gathered and shown: only the environment is missing
            assert all("ansible_env" not in (result.get("ansible_facts") or {}) for result in found), task
            assert any(result.get("ansible_facts") or result.get("results") for result in found), task
        assert files_containing(runner_dir, secret.encode()) == []
        log = operator.log_path.read_text(errors="replace")
        assert "run output" in log and "FQCN setup" in log  # the task output was logged
        assert secret not in log
        events = shared_cluster.get_json("events", "--field-selector", f"involvedObject.name={name}")
        assert secret not in json.dumps(obj) + json.dumps(events)
    finally:  # the next test's operator must not reconcile it too
        shared_cluster.kubectl("delete", KIND.lower(), name, "--wait=false", check=False)
