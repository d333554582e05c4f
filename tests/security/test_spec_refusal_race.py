"""The run receives exactly the object that passed the refusal (docs/security.md, "The object checked is run").

Issue 28 item 2: the refusal checked one object, but the run received the object a later write
returned (the finalizer patch, the ``Running`` status patch), which nobody checked. Flipping
``spec.ansible_remote_tmp: /tmp/x$(touch M)`` on and off every 25 ms ran the command 4 times out of
4 while the log said "spec refused". Through the real entry points -- a real ``hybrid-operator
run`` process, the embedded cluster over HTTPS, a playbook whose ``copy`` and ``shell`` tasks go
through the local connection's shell (temporary directory, executable) -- and with every run
writing down the raw spec it received:

* the issue's flip: no marker, and no run received a spec holding ``ansible_remote_tmp``;
* 20 seeded variations of connection, become and shell variables (``ansible_remote_tmp``,
  ``ansible_shell_executable``, ``ansible_become_exe``/``_flags``/``_user``, ``ansible_async_dir``,
  an ssh ``ProxyCommand``..., raw and camelCase), flipped on four CRs (five variations each, one
  after the other): the same;
* the refusal bypassed (the runner called directly, cold and warm) with the same 20 variations: the
  spec's ``ansible_*`` variables never reach Ansible, and nothing runs.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.extravars import object_key
from hybrid_operator.ansible.runner import AnsibleRunner, RunnerMode
from hybrid_operator.ansible.runs import RunRequest
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind
from security.spec_attacks import VariableAttack, marker_directory, variable_attacks
from support.attacker import SECURITY_GROUP, Operator, write_project
from support.cluster import Cluster, cluster_ssl_context
from support.operator import apply, open_crd

pytestmark = [pytest.mark.security, pytest.mark.e2e, pytest.mark.slow]

KIND = "Flip"
GVK = GroupVersionKind(SECURITY_GROUP, "v1", KIND)
FLIP_SECONDS = 0.025
SEED = 2802
VARIATIONS = 20
PLAYBOOK = f"""\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Record the spec this run received (copy makes a temporary directory through the connection)
      ansible.builtin.copy:
        dest: "{{{{ records }}}}/{{{{ ansible_operator_meta.name }}}}-{{{{ now().strftime('%s%f') }}}}.json"
        content: "{{{{ {object_key(GVK)}_spec | to_json }}}}"
        mode: "0600"
    - name: Run a command through the shell
      ansible.builtin.shell: "true"
      changed_when: false
"""


def project(workdir: Path, records: Path) -> Path:
    watches = f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: {KIND}
  playbook: playbooks/flip.yml
  finalizer:
    name: {SECURITY_GROUP}/flip-cleanup
    vars:
      state: absent
  vars:
    records: {records}
"""
    return write_project(workdir / "project", {"watches.yaml": watches, "playbooks/flip.yml": PLAYBOOK})


@pytest.fixture(scope="module")
def flip_cluster(shared_cluster: Cluster) -> Cluster:
    apply(shared_cluster, open_crd(KIND, SECURITY_GROUP))
    shared_cluster.kubectl("wait", "--for=condition=Established", f"crd/{KIND.lower()}s.{SECURITY_GROUP}")
    return shared_cluster


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("records")


@pytest.fixture(scope="module")
def operator(flip_cluster: Cluster, records: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("flip")
    process = Operator(flip_cluster, project(workdir, records), workdir, workdir / "runner")
    try:
        yield process
    finally:
        process.stop()


class Flipper(threading.Thread):
    """Sets an attack's keys and takes them out again, every ``FLIP_SECONDS``, over one kept-alive connection;
    with several attacks, each pair of flips uses the next one."""

    def __init__(self, cluster: Cluster, name: str, attacks: list[dict[str, Any]]) -> None:
        super().__init__(name=f"flip-{name}", daemon=True)
        self.path = f"/apis/{SECURITY_GROUP}/v1/namespaces/default/{KIND.lower()}s/{name}"
        self.cluster = cluster
        every_key = {key for attack in attacks for key in attack}
        self.patches = [json.dumps({"spec": attack}).encode() for attack in attacks]
        self.benign = json.dumps({"spec": dict.fromkeys(every_key)}).encode()  # null: the key goes
        self.halt = threading.Event()
        self.flips = 0

    def patch(self) -> bytes:
        return self.benign if self.flips % 2 else self.patches[(self.flips // 2) % len(self.patches)]

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.cluster.port, context=cluster_ssl_context(self.cluster),
                                           timeout=10)

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.cluster.token}", "Content-Type": "application/merge-patch+json",
                   "Accept": "application/json"}
        conn = self.connect()
        try:
            while not self.halt.is_set() or self.flips % 2:  # it stops with the attack taken out
                try:
                    conn.request("PATCH", self.path, body=self.patch(), headers=headers)
                    response = conn.getresponse()
                    response.read()
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = self.connect()  # the server closed the kept-alive connection: send it again
                    continue
                if response.status == 200:
                    self.flips += 1
                time.sleep(FLIP_SECONDS)
        finally:
            conn.close()

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=30)
        assert self.flips % 2 == 0, "the flipper stopped with the attack in the spec"


def received(records: Path, name: str) -> list[dict[str, Any]]:
    """The raw specs the runs of ``name`` received, in the order they were written."""
    return [json.loads(path.read_text()) for path in sorted(records.glob(f"{name}-*.json"))]


def flip(cluster: Cluster, operator: Operator, records: Path, attacks: dict[str, list[dict[str, Any]]],
         markers: list[Path], runs: int, seconds: float) -> None:
    """Create each CR benign and flip its attack at once (its first reconcile adds the finalizer, later ones
    write the Running condition) until each had more than ``runs`` runs or ``seconds`` passed (runs are slow
    on a busy machine: the deadline is generous, and each CR must have run at least twice)."""
    for name in attacks:
        apply(cluster, {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": KIND,
                        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
    flippers = [Flipper(cluster, name, attack) for name, attack in attacks.items()]
    for flipper in flippers:
        flipper.start()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not any(marker.exists() for marker in markers):
            if all(len(received(records, name)) > runs for name in attacks):
                break
            time.sleep(0.2)
    finally:
        for flipper in flippers:
            flipper.stop()


def assert_only_checked_specs_ran(records: Path, attacks: dict[str, list[dict[str, Any]]],
                                  operator: Operator) -> None:
    for name, flipped in attacks.items():
        specs = received(records, name)
        assert len(specs) >= 2, f"{name}: the flipping caused no run ({len(specs)})"
        reserved = [spec for spec in specs if set(spec) & {key for attack in flipped for key in attack}]
        assert reserved == [], f"{name}: runs received a spec that the refusal refuses: {reserved}"
        refusals = [r for r in operator.log_records() if r.get("msg") == "spec refused" and r.get("cr") == name]
        assert refusals, f"{name}: the flipping never met the refusal"


def test_flipping_ansible_remote_tmp_runs_nothing(flip_cluster: Cluster, operator: Operator, records: Path) -> None:
    with marker_directory() as markers:
        marker = markers / "issue"
        attacks = {f"issue-{n}": [{"ansible_remote_tmp": f"/tmp/x$(touch {marker})"}] for n in range(4)}
        flip(flip_cluster, operator, records, attacks, [marker], runs=3, seconds=240)
        assert not marker.exists(), "ansible_remote_tmp from a flipped spec ran a command as the operator's user"
        assert_only_checked_specs_ran(records, attacks, operator)


def test_twenty_flipped_variable_attacks_run_nothing(flip_cluster: Cluster, operator: Operator,
                                                     records: Path) -> None:
    with marker_directory() as markers:
        attacks = variable_attacks(SEED, VARIATIONS, markers)
        # four CRs, each flipping through five of the variations (one per pair of flips)
        flipped = {f"vars-{n}": [attack.spec for attack in attacks[n::4]] for n in range(4)}
        flip(flip_cluster, operator, records, flipped, [attack.marker for attack in attacks], runs=3, seconds=240)
        executed = [(attack.name, attack.spec) for attack in attacks if attack.marker.exists()]
        assert executed == [], f"flipped connection/become/shell variables ran commands: {executed}"
        assert_only_checked_specs_ran(records, flipped, operator)


# -- the refusal bypassed: the runner called directly, cold and warm -----------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["cold", "warm"])
async def test_variable_attacks_are_inert_even_if_the_refusal_is_bypassed(mode: RunnerMode, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANSIBLE_LOCAL_TEMP", str(tmp_path / "ansible-tmp"))
    records = tmp_path / "records"
    records.mkdir()
    book = tmp_path / "flip.yml"
    book.write_text(PLAYBOOK)
    watch = AnsibleWatch(gvk=GVK, playbook=book, vars={"records": str(records)})
    runner = AnsibleRunner(max_workers=1, timeout=300, work_dir=tmp_path, project_dir=tmp_path, mode=mode)
    with marker_directory() as markers:
        attacks: list[VariableAttack] = variable_attacks(SEED + 1, VARIATIONS, markers)
        try:
            for attack in attacks:
                obj = {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": KIND, "spec": attack.spec,
                       "metadata": {"name": attack.name, "namespace": "default", "uid": attack.name}}
                result = await runner.run(RunRequest(cr=obj, watch=watch, artifacts_root=tmp_path / "runner"))
                assert not attack.marker.exists(), f"{attack.spec} ran a command as the operator's user ({mode})"
                assert result.succeeded, (attack.spec, result.error, result.failed_tasks)
                # the run happened, with the spec (the raw spec keeps every key, as data)
                assert received(records, attack.name)[-1] == attack.spec
        finally:
            await runner.close()
        executed = [(attack.name, attack.spec) for attack in attacks if attack.marker.exists()]
        assert executed == [], f"connection/become/shell variables ran commands ({mode}): {executed}"
