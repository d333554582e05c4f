"""Secrets at rest on the operator's side (docs/security.md, "Secrets at rest").

A real ``hybrid-operator run`` with ``MY_SECRET_TOKEN`` in its environment reconciles a role kind
that gathers facts (``ANSIBLE_GATHERING=implicit``; our default is explicit) and then waits for a
gate file, so the tests can look at the disk while the run is going, ``kill -9`` the operator and
every process it started, and look again:

* no file under the artifacts directory ever holds the secret: no jsonfile fact cache (it stored
  ``ansible_env``), a ``command`` file redacted when it is written, not after the run;
* each run's kubeconfig sits alone in a 0700 directory as a 0600 file, its token works only while
  the run lasts, the directory goes when the run ends and is swept when a killed operator's
  successor starts.
"""

from __future__ import annotations

import json
import secrets
import ssl
import stat
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import artifacts
from hybrid_operator.config.model import GroupVersionKind
from support.attacker import (
    SECRET_NAME,
    SECURITY_GROUP,
    Operator,
    StartOperator,
    files_containing,
    kubeconfig_credentials,
    write_project,
)
from support.cluster import Cluster
from support.operator import apply, condition, get_or_none, open_crd, wait_for

pytestmark = [pytest.mark.security, pytest.mark.e2e, pytest.mark.slow]

ROLE = """\
- name: Wait for the gate
  ansible.builtin.wait_for:
    path: "{{ gate_file }}"
    timeout: 300
- name: Done
  ansible.builtin.debug:
    msg: "the gate opened"
"""


def project(workdir: Path, kind: str, gate: Path) -> Path:
    watches = f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: {kind}
  role: gated
  vars:
    gate_file: {gate}
"""
    return write_project(workdir / "project", {"watches.yaml": watches, "roles/gated/tasks/main.yml": ROLE})


def gated_cr(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": {"size": 1}}


def install(cluster: Cluster, kind: str) -> None:
    apply(cluster, open_crd(kind, SECURITY_GROUP))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{kind.lower()}s.{SECURITY_GROUP}")


def run_dir_waiting_at_gate(operator: Operator, kind: str, name: str, after: Path | None = None) -> Path:
    """The run directory of the CR's run (a later one than ``after``), once it gathered facts and waits at the gate."""
    directory = artifacts.artifacts_dir(operator.artifacts, GroupVersionKind(SECURITY_GROUP, "v1", kind),
                                        "default", name)

    def waiting() -> Path | None:
        for run in sorted(directory.glob("*")):
            if after is not None and run.name <= after.name:
                continue
            for event in (run / "job_events").glob("*.json"):
                text = event.read_text(errors="replace")
                if "Wait for the gate" in text and "playbook_on_task_start" in text:
                    return run
        return None

    found: Path = wait_for(waiting, f"the run of {name} to wait at the gate", timeout=120)
    return found


def successful(cluster: Cluster, kind: str, name: str) -> dict[str, Any] | None:
    obj = get_or_none(cluster, kind.lower(), name)
    found = condition(obj, "Successful") if obj else None
    return obj if found and found["status"] == "True" else None


def proxy_status(credentials: tuple[str, str, ssl.SSLContext]) -> int:
    """The HTTP status of ``GET /api`` through the ownership proxy with a run's (server, token, TLS context)."""
    server, token, context = credentials
    request = urllib.request.Request(f"{server}/api", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_environment_secrets_never_reach_the_artifacts(shared_cluster: Cluster, start_operator: StartOperator,
                                                       tmp_path: Path) -> None:
    kind = "FactsGate"
    install(shared_cluster, kind)
    gate = tmp_path / "gate"
    secret = f"s3cr3t-{secrets.token_hex(12)}"
    operator = start_operator(shared_cluster, project(tmp_path, kind, gate), tmp_path / "runner",
                              env={SECRET_NAME: secret, "ANSIBLE_GATHERING": "implicit"})
    apply(shared_cluster, gated_cr(kind, "facts"))
    try:
        run = run_dir_waiting_at_gate(operator, kind, "facts")
        # mid-run: facts were gathered, the command file was written
        assert files_containing(tmp_path / "runner", secret.encode()) == []
        assert not (run / "fact_cache").exists(), "facts were cached on disk"
        command = json.loads((run / "command").read_text())
        assert command["env"][SECRET_NAME] == "***"
        # killed mid-run: nothing gets a chance to clean up
        operator.kill9()
        assert files_containing(tmp_path / "runner", secret.encode()) == []
    finally:
        gate.touch()


def test_run_credentials_are_private_to_their_run(shared_cluster: Cluster, start_operator: StartOperator,
                                                  tmp_path: Path) -> None:
    kind = "CredsGate"
    install(shared_cluster, kind)
    gate = tmp_path / "gate"
    watches = project(tmp_path, kind, gate)
    runner = tmp_path / "runner"
    first = start_operator(shared_cluster, watches, runner)
    apply(shared_cluster, gated_cr(kind, "creds"))
    try:
        run = run_dir_waiting_at_gate(first, kind, "creds")
        # one directory per live run, 0700, holding a 0600 kubeconfig the run's KUBECONFIG names
        live = list((runner / "run-credentials").iterdir()) if (runner / "run-credentials").is_dir() else []
        assert len(live) == 1
        assert stat.S_IMODE(live[0].stat().st_mode) == 0o700
        kubeconfig = live[0] / "kubeconfig"
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        assert [path.name for path in live[0].iterdir()] == ["kubeconfig"]
        assert json.loads((run / "command").read_text())["env"]["KUBECONFIG"] == str(kubeconfig)
        assert proxy_status(kubeconfig_credentials(kubeconfig)) == 200  # valid while its run lasts
        assert stat.S_IMODE(runner.stat().st_mode) == 0o700
        assert stat.S_IMODE((runner / "kubeconfig").stat().st_mode) == 0o600  # the operator's own

        first.kill9()  # the run's credentials stay behind...
        assert live[0].exists()
        second = start_operator(shared_cluster, watches, runner)
        wait_for(lambda: not live[0].exists(), "the leftover run credentials to be swept at startup")
        run_dir_waiting_at_gate(second, kind, "creds", after=run)
        current = list((runner / "run-credentials").iterdir())
        assert len(current) == 1 and current[0] != live[0]
        credentials = kubeconfig_credentials(current[0] / "kubeconfig")
        assert proxy_status(credentials) == 200

        gate.touch()
        wait_for(lambda: successful(shared_cluster, kind, "creds"), "the run to finish")
        wait_for(lambda: not any((runner / "run-credentials").iterdir()), "the run's credentials to be removed")
        assert proxy_status(credentials) == 401  # revoked with its run
    finally:
        gate.touch()
