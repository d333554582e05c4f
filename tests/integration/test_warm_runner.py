"""The warm runner (issue 16): runs are fresh forks, the worker comes back, and cold still works.

Every other AnsibleRunner test runs through the warm runner too (it is the default); these check
what only the warm path could get wrong: state shared between runs of one pre-imported interpreter,
a stale ``ansible.cfg``, a dead worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator import processes
from hybrid_operator.ansible.runner import AnsibleRunner
from hybrid_operator.ansible.runs import RunRequest
from hybrid_operator.ansible.warmpool import WarmPool
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent / "ansible_fixtures"
GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")


@pytest.fixture
async def runner(tmp_path: Path, isolated_home: Path) -> AsyncIterator[AnsibleRunner]:
    work = tmp_path / "work"
    work.mkdir()
    instance = AnsibleRunner(max_workers=1, timeout=120, work_dir=work, project_dir=tmp_path, mode="warm")
    yield instance
    await instance.close()


def request(tmp_path: Path, playbook: Path, spec: dict[str, Any], env: dict[str, str] | None = None) -> RunRequest:
    cr = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
          "metadata": {"name": "demo", "namespace": "default", "uid": "1"}, "spec": spec}
    return RunRequest(cr=cr, watch=AnsibleWatch(gvk=GVK, playbook=playbook), artifacts_root=tmp_path / "artifacts",
                      env=env or {})


def pool_of(runner: AnsibleRunner) -> WarmPool:
    assert runner.warm_pool is not None
    return runner.warm_pool


async def test_consecutive_warm_runs_share_no_state(runner: AnsibleRunner, tmp_path: Path) -> None:
    probe = tmp_path / "probe.jsonl"
    env = {"ISOLATION_PROBE_OUT": str(probe)}
    playbook = FIXTURES / "isolation" / "isolation.yml"
    learn = await runner.run(request(tmp_path, playbook, {"marker": "learn"}, env))  # finds the run's zygote
    assert learn.succeeded, learn.failure_message
    first = await runner.run(request(tmp_path, playbook, {"marker": "first", "onlyInFirst": True}, env))
    assert first.succeeded, first.failure_message
    second = await runner.run(request(tmp_path, playbook, {"marker": "second"}, env))

    assert second.succeeded, second.failure_message  # the assert task: no variable, fact or env var leaked
    assert pool_of(runner).warm_runs == 2, pool_of(runner).last_refusal
    records = [json.loads(line) for line in probe.read_text().splitlines()]
    assert [(record["calls_before"], record["leak_before"]) for record in records] == [(0, None)] * 3
    assert len({record["pid"] for record in records}) == 3
    assert "HYBRID_ISOLATION_LEAK" not in os.environ


@pytest.mark.parametrize("gathering", ["explicit", "implicit"])
async def test_runs_of_a_role_share_one_pre_imported_interpreter(
        runner: AnsibleRunner, tmp_path: Path, gathering: str) -> None:
    """Each run has a private data directory of its own; nothing of it may reach the run's environment,
    or every run of a role would need an interpreter of its own (as when ansible-runner's ``role``
    argument put ``<private data dir>/roles`` on ``ANSIBLE_ROLES_PATH``)."""
    role = RunRequest(cr={"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                          "metadata": {"name": "demo", "namespace": "default", "uid": "1"}, "spec": {}},
                      watch=AnsibleWatch(gvk=GVK, role=FIXTURES / "roles" / "demo"),
                      artifacts_root=tmp_path / "artifacts", env={"ANSIBLE_GATHERING": gathering})
    results = [await runner.run(role) for _ in range(3)]

    assert [(r.succeeded, r.ok, r.stats_data) for r in results] == \
        [(True, 2 + (gathering == "implicit"), {"status": {"from_role": True}})] * 3
    assert pool_of(runner).warm_runs == 2, pool_of(runner).last_refusal  # the first found no interpreter yet


async def test_a_changed_ansible_cfg_is_read(runner: AnsibleRunner, tmp_path: Path) -> None:
    playbook = FIXTURES / "isolation" / "cfg.yml"
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\ntimeout = 11\n")
    seen = [(await runner.run(request(tmp_path, playbook, {}))).stats_data.get("timeout") for _ in range(2)]
    config.write_text("[defaults]\ntimeout = 12\n")
    seen.append((await runner.run(request(tmp_path, playbook, {}))).stats_data.get("timeout"))

    assert seen == ["11", "11", "12"]
    assert pool_of(runner).warm_runs >= 1


async def test_a_killed_worker_is_restarted(runner: AnsibleRunner, tmp_path: Path) -> None:
    playbook = FIXTURES / "playbooks" / "counts.yml"
    assert (await runner.run(request(tmp_path, playbook, {}))).succeeded
    pid = pool_of(runner).worker_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pool_of(runner).worker_pid == pid and time.monotonic() < deadline:
        time.sleep(0.05)

    result = await runner.run(request(tmp_path, playbook, {}))

    assert result.succeeded, result.failure_message
    assert pool_of(runner).started == 2


async def test_cold_mode_runs_without_a_worker(tmp_path: Path, isolated_home: Path) -> None:
    runner = AnsibleRunner(work_dir=tmp_path, project_dir=tmp_path, mode="cold")
    try:
        result = await runner.run(request(tmp_path, FIXTURES / "playbooks" / "counts.yml", {}))
    finally:
        await runner.close()

    assert result.succeeded, result.failure_message
    assert runner.warm_pool is None


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        AnsibleRunner(mode="lukewarm")  # type: ignore[arg-type]


async def test_a_warm_run_keeps_its_local_temp_under_ansible_home_and_removes_it(
        runner: AnsibleRunner, tmp_path: Path, isolated_home: Path) -> None:
    """ansible-core's default local temp is a template (``{{ ANSIBLE_HOME ~ "/tmp" }}``) rendered at import:
    a run must use the rendered directory, never the template as a path relative to the project."""
    playbook = tmp_path / "module.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - command: 'true'\n")
    for _ in range(2):  # the first finds the run's zygote, the second runs warm
        result = await runner.run(request(tmp_path, playbook, {}))
        assert result.succeeded, result.failure_message
    assert pool_of(runner).warm_runs >= 1, pool_of(runner).last_refusal
    assert not [entry.name for entry in tmp_path.iterdir() if entry.name.startswith("{{")]
    local_tmp = isolated_home / ".ansible" / "tmp"
    assert local_tmp.is_dir()
    assert not [entry.name for entry in local_tmp.iterdir() if entry.name.startswith("ansible-local-")
                and (entry / "ansiballz_cache").exists()], "each run removes its own local temp"


_HOLDER = """
import json, sys
from hybrid_operator import processes
from hybrid_operator.ansible.warmpool import WarmPool
pool = WarmPool(env=processes.marker(sys.argv[1]))
pool.run(json.loads(sys.argv[2]), lambda event: None, lambda: False)
"""


def _waiting_on_a_pipe(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "wchan").read_text() == "wait_for_partner"
    except OSError:
        return False


def test_a_run_blocked_before_its_playbook_does_not_outlive_a_killed_operator(
        tmp_path: Path, isolated_home: Path) -> None:
    """kill -9 of the operator while its run child waits to open the ``command`` pipe (whose reader, a
    thread of the operator, died with it): the worker, its zygote and the run child all go."""
    scope = f"warm-orphan-{os.getpid()}-{time.monotonic_ns()}"
    artifacts = tmp_path / "artifacts"
    (artifacts / "blocked").mkdir(parents=True)
    os.mkfifo(artifacts / "blocked" / "command", 0o600)  # nobody will ever read it
    (tmp_path / "private").mkdir()
    kwargs = {"private_data_dir": str(tmp_path / "private"), "artifact_dir": str(artifacts), "ident": "blocked",
              "playbook": str(FIXTURES / "playbooks" / "trivial.yml"), "quiet": True,
              "envvars": {"ANSIBLE_NOCOLOR": "1"}}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, scope, json.dumps(kwargs)])
    try:
        deadline = time.monotonic() + 60
        while not any(_waiting_on_a_pipe(pid) for pid in processes.leftovers(scope)):
            assert holder.poll() is None, "the operator stand-in exited early"
            assert time.monotonic() < deadline, "no run child came to wait on the command pipe"
            time.sleep(0.05)
        assert len(processes.leftovers(scope)) >= 2, "a worker and a run child"

        holder.kill()
        holder.wait()

        deadline = time.monotonic() + 15
        while processes.leftovers(scope) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes.leftovers(scope) == [], "processes of a killed operator stayed behind"
    finally:
        holder.kill()
        processes.kill_leftovers(scope)
