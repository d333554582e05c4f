"""Warm modules (ansible/modulehost.py): a warm run's Python modules execute in forks of an interpreter
that has imported the Kubernetes client, with the module's own environment, status and streams, and
die with a cancelled run; cold mode and anything that is not a module file go to the real Python.

The module here (``ansible_fixtures/warm_modules/library/warm_probe.py``) reports its parent process,
whether ``kubernetes`` was imported before it started, and its environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import modulehost
from hybrid_operator.ansible.runner import AnsibleRunner
from hybrid_operator.ansible.runs import RunRequest
from hybrid_operator.ansible.warmpool import MODULE_DIR_PREFIX, sweep_module_dirs
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind

pytestmark = pytest.mark.integration

PLAYBOOK = Path(__file__).parent / "ansible_fixtures" / "warm_modules" / "probe.yml"
GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")


async def make_runner(tmp_path: Path, mode: str) -> AnsibleRunner:
    work = tmp_path / f"work-{mode}"
    work.mkdir()
    return AnsibleRunner(max_workers=2, timeout=120, work_dir=work, project_dir=tmp_path, mode=mode)  # type: ignore[arg-type]


@pytest.fixture
async def warm(tmp_path: Path, isolated_home: Path) -> AsyncIterator[AnsibleRunner]:
    runner = await make_runner(tmp_path, "warm")
    yield runner
    await runner.close()


def probe_request(tmp_path: Path, name: str, spec: dict[str, Any], kubeconfig: Path | None = None) -> RunRequest:
    cr = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
          "metadata": {"name": name, "namespace": "default", "uid": name},
          "spec": {"out": str(tmp_path / f"{name}.json"), **spec}}
    return RunRequest(cr=cr, watch=AnsibleWatch(gvk=GVK, playbook=PLAYBOOK), artifacts_root=tmp_path / "artifacts",
                      kubeconfig=kubeconfig)


async def probe(runner: AnsibleRunner, tmp_path: Path, name: str, spec: dict[str, Any] | None = None,
                kubeconfig: Path | None = None) -> dict[str, Any]:
    result = await runner.run(probe_request(tmp_path, name, spec or {}, kubeconfig))
    assert result.succeeded, result.failure_message
    report: dict[str, Any] = json.loads((tmp_path / f"{name}.json").read_text())
    return report


async def test_modules_run_in_a_pre_imported_interpreter_with_each_runs_own_environment(
        warm: AnsibleRunner, tmp_path: Path) -> None:
    first_config, second_config = tmp_path / "first.kubeconfig", tmp_path / "second.kubeconfig"
    first = await probe(warm, tmp_path, "first", kubeconfig=first_config)
    second = await probe(warm, tmp_path, "second", kubeconfig=second_config)
    other_env = await probe(warm, tmp_path, "third", {"task_env": "other"}, kubeconfig=first_config)

    for report in (first, second, other_env):
        assert report["preloaded"] is True
        assert "hybrid_operator.ansible.modulehost zygote" in report["parent"]
        assert report["argv0"] == "warm_probe.py"  # as AnsiballZ sets it, warm or cold
        assert report["executable"] == sys.executable
    # one zygote for runs that differ only in their kubeconfig, each seeing its own
    assert first["parent_pid"] == second["parent_pid"]
    assert (first["kubeconfig"], first["kube_default"]) == (str(first_config), str(first_config))
    assert (second["kubeconfig"], second["kube_default"]) == (str(second_config), str(second_config))
    # a task's `environment:` is part of what the libraries saw at import: another zygote
    assert other_env["parent_pid"] != first["parent_pid"]
    assert (first["task_env"], other_env["task_env"]) == ("none", "other")


async def test_cold_mode_starts_each_module_as_a_fresh_interpreter(tmp_path: Path, isolated_home: Path) -> None:
    runner = await make_runner(tmp_path, "cold")
    try:
        report = await probe(runner, tmp_path, "cold")
    finally:
        await runner.close()

    assert report["preloaded"] is False
    assert "modulehost" not in report["parent"]
    assert report["argv0"] == "warm_probe.py"
    assert report["executable"] == sys.executable


@pytest.mark.parametrize(("mode", "message"), [
    ("fail", "the probe failed on purpose"),  # fail_json
    ("raise", "MODULE FAILURE"),  # an uncaught exception: the traceback on stderr, exit status 1
])
async def test_a_failing_module_fails_its_task_as_it_does_cold(
        warm: AnsibleRunner, tmp_path: Path, mode: str, message: str) -> None:
    cold = await make_runner(tmp_path, "cold")
    try:
        cold_result = await cold.run(probe_request(tmp_path, mode, {"mode": mode}))
    finally:
        await cold.close()
    warm_result = await warm.run(probe_request(tmp_path, mode, {"mode": mode}))

    assert (warm_result.succeeded, warm_result.failures) == (cold_result.succeeded, cold_result.failures) == (False, 1)
    assert message in (warm_result.failure_message or "")
    assert warm_result.failure_message == cold_result.failure_message
    assert not (tmp_path / f"{mode}.json").exists()


async def test_a_cancelled_run_kills_its_warm_module(warm: AnsibleRunner, tmp_path: Path) -> None:
    pidfile = tmp_path / "module.pid"
    run = asyncio.create_task(warm.run(probe_request(tmp_path, "sleeper", {"mode": "sleep", "pidfile": str(pidfile)})))
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline and not run.done(), "the module never started"
        await asyncio.sleep(0.05)
    pid = int(pidfile.read_text())
    with open(f"/proc/{pid}/status") as status:
        parent = next(int(line.split()[1]) for line in status if line.startswith("PPid:"))
    assert b"modulehost\x00zygote" in Path(f"/proc/{parent}/cmdline").read_bytes()

    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists(), "the module outlived its cancelled run"


# -- the launcher and the broker alone ----------------------------------------------------------------------

SCRIPT = """\
import os, signal, sys
print("argv", sys.argv, "cwd", os.getcwd(), "env", os.environ.get("PROBE"), "umask", oct(os.umask(0o22)), flush=True)
sys.stderr.write("to stderr\\n")
if os.environ.get("PROBE") == "signal":
    os.kill(os.getpid(), signal.SIGTERM)
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


def launch(launcher: Path, script: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(launcher), str(script)], capture_output=True, text=True, timeout=60, check=False,
                          cwd=script.parent, env={**os.environ, **env})


def test_the_launcher_without_a_broker_runs_the_module_cold(tmp_path: Path) -> None:
    launcher, _ = modulehost.write_launcher(tmp_path, sys.executable)
    script = tmp_path / "AnsiballZ_probe.py"
    script.write_text(SCRIPT)

    done = launch(launcher, script, PROBE="cold", PROBE_EXIT="3")
    other = subprocess.run([str(launcher), "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                           timeout=60, check=True)

    assert done.returncode == 3
    assert f"argv ['{script}'] cwd {tmp_path} env cold" in done.stdout and done.stderr == "to stderr\n"
    assert other.stdout.strip() == sys.executable


def test_the_broker_runs_a_module_with_the_launchers_streams_status_and_signal(tmp_path: Path) -> None:
    launcher, socket_path = modulehost.write_launcher(tmp_path, sys.executable)
    script = tmp_path / "AnsiballZ_probe.py"
    script.write_text(SCRIPT)
    broker = subprocess.Popen([sys.executable, "-m", "hybrid_operator.ansible.modulehost", "broker", str(socket_path)])
    try:
        wait_for_socket(socket_path)
        ok, failed, killed = (launch(launcher, script, PROBE="warm"), launch(launcher, script, PROBE_EXIT="5"),
                              launch(launcher, script, PROBE="signal"))
        cold = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False,
                              cwd=tmp_path, env={**os.environ, "PROBE": "warm"})
    finally:
        broker.terminate()
        broker.wait(timeout=30)

    assert (ok.returncode, ok.stdout, ok.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert failed.returncode == 5
    assert killed.returncode == -signal.SIGTERM, killed
    assert killed.stderr == "to stderr\n"


def test_a_zygote_is_shared_by_environments_that_differ_only_per_run() -> None:
    base = {"PATH": "/bin", "HOME": "/root"}
    assert modulehost.fingerprint({**base, "KUBECONFIG": "/a", "PWD": "/x"}) == \
        modulehost.fingerprint({**base, "KUBECONFIG": "/b", "K8S_AUTH_KUBECONFIG": "/b", "PWD": "/y"})
    assert modulehost.fingerprint(base) != modulehost.fingerprint({**base, "HTTPS_PROXY": "http://proxy:3128"})


def test_a_script_that_ends_without_exit_and_a_bare_module_host(tmp_path: Path) -> None:
    launcher, socket_path = modulehost.write_launcher(tmp_path, sys.executable)
    script = tmp_path / "AnsiballZ_plain.py"
    script.write_text("print('plain end')\n")
    broker = subprocess.Popen([sys.executable, "-m", "hybrid_operator.ansible.modulehost", "broker", str(socket_path)])
    try:
        wait_for_socket(socket_path)
        done = subprocess.run([str(launcher), str(script)], capture_output=True, text=True, timeout=60, check=False)
    finally:
        broker.terminate()
        broker.wait(timeout=30)
    usage = subprocess.run([sys.executable, "-m", "hybrid_operator.ansible.modulehost"], capture_output=True,
                           text=True, timeout=60, check=False)

    assert (done.returncode, done.stdout) == (0, "plain end\n")
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_an_interpreter_path_that_cannot_be_a_shebang_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="cannot start a script"):
        modulehost.write_launcher(tmp_path, "/opt/my python/bin/python")
    with pytest.raises(OSError, match="cannot start a script"):
        modulehost.write_launcher(tmp_path, "/" + "x" * modulehost.MAX_SHEBANG_PATH)


def wait_for_socket(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, "the broker never listened"
        time.sleep(0.05)


# -- the broker in this process: refusals, one zygote per environment, replacement --------------------------


class InProcessBroker:
    """A Broker serving in a thread of the test, so its decisions can be watched."""

    def __init__(self, directory: Path) -> None:
        self.launcher, self.socket_path = modulehost.write_launcher(directory, sys.executable)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(str(self.socket_path))
        listener.listen(8)
        self.listener = listener
        self.broker = modulehost.Broker(listener)
        self.thread = threading.Thread(target=self.broker.serve, daemon=True)
        self.thread.start()

    def zygote_pids(self) -> list[int]:
        return [zygote.process.pid for zygote in self.broker._zygotes.values()]

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(timeout=30)
        self.broker.close()


@pytest.fixture
def in_process_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    broker = InProcessBroker(tmp_path)
    yield broker
    broker.close()


def test_a_malformed_request_is_refused_and_the_launcher_would_go_cold(
        in_process_broker: InProcessBroker, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.connect(str(in_process_broker.socket_path))
        socket.send_fds(conn, [b"{not json"], [0, 1, 2])
        answer = conn.recv(16)

    assert answer == b""  # no "+": the launcher execs the real interpreter
    assert any(record.getMessage() == "warm module request refused" for record in caplog.records)
    assert in_process_broker.zygote_pids() == []


def test_zygotes_are_kept_per_environment_bounded_and_replaced_when_dead(
        in_process_broker: InProcessBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modulehost, "MAX_ZYGOTES", 1)
    script = tmp_path / "AnsiballZ_env.py"
    script.write_text("import os\nprint(os.environ['WHICH'])\n")

    def run(which: str) -> str:
        done = subprocess.run([str(in_process_broker.launcher), str(script)], capture_output=True, text=True,
                              timeout=60, check=True, env={**os.environ, "WHICH": which})
        return done.stdout.strip()

    assert run("a") == "a"
    [first] = in_process_broker.zygote_pids()
    assert run("b") == "b"  # another environment: a zygote of its own, the first dropped (at most one)
    [second] = in_process_broker.zygote_pids()
    assert second != first and not Path(f"/proc/{first}").exists()
    os.kill(second, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while in_process_broker.broker._zygotes and next(iter(in_process_broker.broker._zygotes.values())).alive():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert run("b") == "b"  # the dead zygote is replaced
    [third] = in_process_broker.zygote_pids()
    assert third not in (first, second)


def test_a_new_pool_sweeps_the_module_directories_of_operators_that_are_gone(tmp_path: Path) -> None:
    gone = tmp_path / f"{MODULE_DIR_PREFIX}{2**22 + 7}-abc"  # above the kernel's pid_max: never running
    alive = tmp_path / f"{MODULE_DIR_PREFIX}{os.getpid()}-abc"
    other = tmp_path / "hybrid-modules-notapid-abc"
    for directory in (gone, alive, other):
        directory.mkdir()
        (directory / "python").write_text("#!/bin/false\n")

    removed = sweep_module_dirs(tmp_path)

    assert removed == [gone]
    assert not gone.exists() and alive.exists() and other.exists()
