"""A CR's spec cannot steer Ansible (docs/security.md, "The spec cannot steer Ansible").

The attacker may only create custom resources. Through the real entry points -- a CR applied with
kubectl to the embedded cluster, a real ``hybrid-operator run`` process, a real ``ansible-playbook``
-- the issue's attack (``ansible_connection: ssh`` with a ``ProxyCommand`` that runs a command as
the operator's user) must run nothing: the CR gets a Failure condition naming the key and a Warning
Event, and no run starts. The last test bypasses the refusal and runs the runner directly, to show
that the pinned connection still wins (defence in depth).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import artifacts
from hybrid_operator.ansible.runner import AnsibleRunner
from hybrid_operator.ansible.runs import RunRequest
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind
from support.attacker import SECURITY_GROUP, Operator, unique_marker, write_project
from support.cluster import Cluster
from support.operator import apply, condition, get_or_none, open_crd, wait_for

pytestmark = [pytest.mark.security]

KIND = "Steer"
GVK = GroupVersionKind(SECURITY_GROUP, "v1", KIND)
FINALIZER = f"{SECURITY_GROUP}/cleanup"
PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Run a module (through whatever connection the variables choose)
      ansible.builtin.command: "true"
      changed_when: false
"""
WATCHES = f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: {KIND}
  playbook: playbooks/steer.yml
  finalizer:
    name: {FINALIZER}
    vars:
      state: absent
"""


def proxy_command_spec(marker: Path, *, camel: bool = False) -> dict[str, Any]:
    """The issue's attack: ssh to 127.0.0.1 through a ProxyCommand that runs ``touch <marker>``."""
    args = f'-o ProxyCommand="touch {marker}" -o BatchMode=yes -o StrictHostKeyChecking=no'
    if camel:
        return {"ansibleConnection": "ssh", "ansibleHost": "127.0.0.1", "ansibleSshCommonArgs": args}
    return {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_ssh_common_args": args}


@pytest.fixture(scope="module")
def steer_cluster(shared_cluster: Cluster) -> Cluster:
    apply(shared_cluster, open_crd(KIND, SECURITY_GROUP))
    shared_cluster.kubectl("wait", "--for=condition=Established", f"crd/{KIND.lower()}s.{SECURITY_GROUP}")
    return shared_cluster


@pytest.fixture(scope="module")
def operator(steer_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("steer")
    watches = write_project(workdir / "project", {"watches.yaml": WATCHES, "playbooks/steer.yml": PLAYBOOK})
    process = Operator(steer_cluster, watches, workdir, workdir / "runner")
    try:
        yield process
    finally:
        process.stop()


def steer(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": KIND, "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def failed(cluster: Cluster, name: str) -> dict[str, Any] | None:
    obj = get_or_none(cluster, KIND.lower(), name)
    found = condition(obj, "Failure") if obj else None
    return obj if found and found["status"] == "True" else None


def warning_events(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    listing = cluster.get_json("events", "--field-selector", f"involvedObject.name={name}")
    return [event for event in listing["items"] if event.get("type") == "Warning"]


def assert_refused_without_a_run(cluster: Cluster, operator: Operator, name: str, keys: list[str],
                                 marker: Path | None = None) -> None:
    """Nothing ran (``marker`` absent); the CR has a Failure naming every key and a Warning Event; no
    finalizer, no run, no artifacts."""
    obj = wait_for(lambda: failed(cluster, name), f"{name} to get a Failure condition")
    assert marker is None or not marker.exists(), "the spec's ProxyCommand ran as the operator's user"
    failure = condition(obj, "Failure")
    assert failure is not None
    for key in keys:
        assert key in failure["message"], failure["message"]
    events = wait_for(lambda: warning_events(cluster, name), f"a Warning Event about {name}")
    assert any(all(key in event["message"] for key in keys) for event in events), events
    assert FINALIZER not in (obj["metadata"].get("finalizers") or [])
    assert operator.runs(name) == []
    assert not artifacts.artifacts_dir(operator.artifacts, GVK, "default", name).exists()


def test_proxy_command_in_the_spec_runs_nothing(steer_cluster: Cluster, operator: Operator) -> None:
    marker = unique_marker()
    try:
        apply(steer_cluster, steer("pwn-raw", proxy_command_spec(marker)))
        assert_refused_without_a_run(steer_cluster, operator, "pwn-raw",
                                     ["spec.ansible_connection", "spec.ansible_host", "spec.ansible_ssh_common_args"],
                                     marker)
    finally:
        marker.unlink(missing_ok=True)


def test_camel_case_keys_are_refused_after_snake_case_conversion(steer_cluster: Cluster, operator: Operator) -> None:
    marker = unique_marker()
    try:
        apply(steer_cluster, steer("pwn-camel", proxy_command_spec(marker, camel=True)))
        assert_refused_without_a_run(steer_cluster, operator, "pwn-camel",
                                     ['spec.ansibleConnection: becomes the variable "ansible_connection"'], marker)
    finally:
        marker.unlink(missing_ok=True)


def test_interpreter_and_magic_variables_are_refused(steer_cluster: Cluster, operator: Operator) -> None:
    spec = {"ansible_python_interpreter": "/bin/false", "playbookDir": "/tmp", "hostvars": {}}
    apply(steer_cluster, steer("pwn-magic", spec))
    assert_refused_without_a_run(steer_cluster, operator, "pwn-magic",
                                 ["spec.ansible_python_interpreter", "spec.playbookDir", "spec.hostvars"])


def test_snake_case_collisions_are_refused_naming_both_keys(steer_cluster: Cluster, operator: Operator) -> None:
    spec = {"fooBar": "a", "foo_bar": "b", "nested": {"sizeLimit": 1, "size_limit": 2}}
    apply(steer_cluster, steer("collide", spec))
    assert_refused_without_a_run(steer_cluster, operator, "collide",
                                 ["spec.fooBar and spec.foo_bar", "spec.nested.sizeLimit and spec.nested.size_limit"])


def test_playbook_keywords_as_spec_keys_still_run(steer_cluster: Cluster, operator: Operator) -> None:
    """What real SDK operators use as spec keys (ansible-core warns about them as variables) is not refused."""
    spec = {"name": "web", "namespace": "apps", "port": 80, "tags": ["a"], "environment": "prod", "timeout": 5}
    apply(steer_cluster, steer("keywords", spec))

    def successful() -> dict[str, Any] | None:
        obj = get_or_none(steer_cluster, KIND.lower(), "keywords")
        found = condition(obj, "Successful") if obj else None
        return obj if found and found["status"] == "True" else None

    wait_for(successful, "the keywords CR to succeed")
    assert len(operator.runs("keywords")) >= 1


# -- defence in depth: the refusal bypassed, the runner called directly -----------------------------------------


@pytest.mark.integration
async def test_the_pinned_connection_wins_even_if_a_spec_var_got_through(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANSIBLE_LOCAL_TEMP", str(tmp_path / "ansible-tmp"))
    playbook = tmp_path / "report.yml"
    playbook.write_text("""\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Run a module
      ansible.builtin.command: "true"
      changed_when: false
    - name: Report what Ansible used
      ansible.builtin.set_stats:
        per_host: false
        data:
          connection: "{{ ansible_connection }}"
          interpreter: "{{ ansible_python_interpreter }}"
""")
    marker = unique_marker()
    spec = {**proxy_command_spec(marker), "ansible_python_interpreter": shutil.which("false") or "/bin/false"}
    cr = {**steer("bypass", spec), "metadata": {"name": "bypass", "namespace": "default", "uid": "1"}}
    runner = AnsibleRunner(max_workers=1, timeout=120, work_dir=tmp_path, project_dir=tmp_path)
    pinned = str(runner.module_python)  # the warm module launcher, which execs this Python for anything else
    try:
        result = await runner.run(RunRequest(cr=cr, watch=AnsibleWatch(gvk=GVK, playbook=playbook),
                                             artifacts_root=tmp_path / "runner"))
    finally:
        await runner.close()
        leaked = marker.exists()
        marker.unlink(missing_ok=True)
    assert not leaked, "the spec's ProxyCommand ran as the operator's user"
    assert result.succeeded, (result.error, result.failed_tasks, result.unreachable)
    assert pinned != shutil.which("false")
    assert dict(result.stats_data) == {"connection": "local", "interpreter": pinned}
    command = json.loads((result.artifact_dir / "command").read_text()) if result.artifact_dir else {}
    assert command["command"][-1].endswith(".yml") and "ansible_connection" in " ".join(command["command"])
