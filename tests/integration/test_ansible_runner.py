"""Integration tests of AnsibleRunner: real ansible-runner and ansible-playbook on fixture playbooks.

No cluster is involved: the fixtures only touch localhost. Each test gets its own HOME, artifact
root and private-dir root, so runs never see each other's files.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from hybrid_operator.ansible import artifacts
from hybrid_operator.ansible.runner import AnsibleRunner
from hybrid_operator.ansible.runs import RunRequest, RunResult
from hybrid_operator.config.model import AnsibleWatch, Finalizer, GroupVersionKind

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent / "ansible_fixtures"
PLAYBOOKS = FIXTURES / "playbooks"
GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")


def make_cr(spec: dict[str, Any] | None = None, name: str = "demo") -> dict[str, Any]:
    return {
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default", "uid": "1234"},
        "spec": spec or {},
    }


@pytest.fixture
async def runner(tmp_path: Path, isolated_home: Path) -> AsyncIterator[AnsibleRunner]:
    work = tmp_path / "work"
    work.mkdir()
    instance = AnsibleRunner(max_workers=2, timeout=60, work_dir=work, project_dir=tmp_path)
    yield instance
    await instance.close()


def request_for(
    tmp_path: Path, *, playbook: str | None = None, role: Path | None = None,
    cr: dict[str, Any] | None = None, watch_vars: dict[str, Any] | None = None, **options: Any,
) -> RunRequest:
    watch = AnsibleWatch(
        gvk=GVK, playbook=PLAYBOOKS / playbook if playbook else None, role=role, vars=watch_vars or {},
        finalizer=options.pop("watch_finalizer", None),
    )
    return RunRequest(cr=cr or make_cr(), watch=watch, artifacts_root=tmp_path / "artifacts", **options)


def run_dirs(tmp_path: Path, name: str = "demo") -> list[Path]:
    directory = artifacts.artifacts_dir(tmp_path / "artifacts", GVK, "default", name)
    return sorted(path for path in directory.iterdir() if path.is_dir()) if directory.exists() else []


async def test_successful_playbook_reports_counts_and_stats(runner: AnsibleRunner, tmp_path: Path) -> None:
    result = await runner.run(request_for(tmp_path, playbook="counts.yml"))

    assert result.error is None, result.error
    assert result.succeeded
    assert (result.ok, result.changed, result.skipped, result.failures) == (3, 1, 1, 0)
    assert result.failed_tasks == ()
    assert result.stats_data == {"status": {"observed": "demo", "replicas": 3}}
    assert result.completion is not None and result.completion.endswith("Z")
    assert result.requeue_after is None
    assert result.artifact_dir is not None and result.artifact_dir.is_dir()
    assert result.artifact_dir.name == result.artifact_ident
    assert (result.artifact_dir / "job_events").is_dir()
    assert not list((tmp_path / "work").iterdir()), "the private data directory must be removed"


async def test_role_run(runner: AnsibleRunner, tmp_path: Path) -> None:
    result = await runner.run(request_for(tmp_path, role=FIXTURES / "roles" / "demo", env={
        "ANSIBLE_GATHERING": "explicit"}))

    assert result.succeeded, result.error
    assert result.ok == 2
    assert result.stats_data == {"status": {"from_role": True}}


async def test_failing_task_is_reported_with_its_message(runner: AnsibleRunner, tmp_path: Path) -> None:
    result = await runner.run(request_for(tmp_path, playbook="fail.yml"))

    assert not result.succeeded
    assert result.error is None
    assert result.failures == 1
    assert result.ok == 1
    assert [tuple(failed) for failed in result.failed_tasks] == [
        ("create the widget", "the widget could not be created")]
    assert result.failure_message == "the widget could not be created"


@pytest.mark.parametrize(("playbook", "expected_failed", "ignored", "rescued"), [
    ("tolerated.yml", [], 1, 1),
    ("rescued_then_failed.yml", [("real failure", "this one is real")], 0, 1),
])
async def test_ignored_and_rescued_failures_do_not_count(
    runner: AnsibleRunner, tmp_path: Path, playbook: str, expected_failed: list[tuple[str, str]],
    ignored: int, rescued: int,
) -> None:
    result = await runner.run(request_for(tmp_path, playbook=playbook))

    assert [tuple(failed) for failed in result.failed_tasks] == expected_failed
    assert result.failures == len(expected_failed)
    assert (result.ignored, result.rescued) == (ignored, rescued)
    assert result.succeeded is (not expected_failed)


async def test_syntax_error_gives_a_clear_error(runner: AnsibleRunner, tmp_path: Path) -> None:
    started = time.monotonic()
    result = await asyncio.wait_for(runner.run(request_for(tmp_path, playbook="syntax_error.yml")), 30)

    assert time.monotonic() - started < 30
    assert not result.succeeded
    assert result.completion is None
    assert result.error is not None
    assert "no playbook_on_stats event" in result.error
    assert "not_a_keyword_at_all" in result.error
    assert "syntax_error.yml" in result.error
    assert "\x1b[" not in result.error


async def test_missing_playbook_is_an_error_not_an_exception(runner: AnsibleRunner, tmp_path: Path) -> None:
    result = await runner.run(request_for(tmp_path, playbook="does-not-exist.yml"))

    assert not result.succeeded
    assert result.error is not None
    assert "does-not-exist.yml" in result.error


async def test_requeue_after_is_detected(runner: AnsibleRunner, tmp_path: Path) -> None:
    result = await runner.run(request_for(tmp_path, playbook="requeue.yml"))

    assert result.succeeded, result.error
    assert result.requeue_after == timedelta(minutes=1, seconds=30)


async def test_extra_vars_do_not_leak_between_runs(runner: AnsibleRunner, tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    first = await runner.run(request_for(
        tmp_path, playbook="record.yml", cr=make_cr({"size": 1, "onlyFirst": "x"}),
        watch_vars={"result_file": str(out)}))
    assert first.succeeded, first.error
    assert json.loads(out.read_text())["only_first"] == "x"

    second = await runner.run(request_for(
        tmp_path, playbook="record.yml", cr=make_cr({"size": 2}), watch_vars={"result_file": str(out)}))

    assert second.succeeded, second.error
    seen = json.loads(out.read_text())
    assert str(seen["size"]) == "2"
    assert seen["only_first"] == "undefined"


async def test_mark_unsafe_keeps_cr_templates_literal(runner: AnsibleRunner, tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    injection = "{{ lookup('pipe', 'echo pwned') }}"
    result = await runner.run(request_for(
        tmp_path, playbook="record.yml", cr=make_cr({"template": injection}),
        watch_vars={"result_file": str(out)}))

    assert result.succeeded, result.error
    assert json.loads(out.read_text())["template"] == injection


async def test_environment_and_finalizer_vars_reach_the_playbook(
    runner: AnsibleRunner, tmp_path: Path
) -> None:
    out = tmp_path / "seen.json"
    kubeconfig = tmp_path / "proxy.kubeconfig"
    result = await runner.run(request_for(
        tmp_path, playbook="record.yml", watch_vars={"result_file": str(out)}, kubeconfig=kubeconfig,
        env={"HYBRID_TEST_VALUE": "from-request"}, finalizer=True,
        watch_finalizer=Finalizer(name="cache.example.com/finalizer", vars={"finalizing": True})))

    assert result.succeeded, result.error
    seen = json.loads(out.read_text())
    assert seen["kubeconfig"] == str(kubeconfig)
    assert seen["k8s_auth_kubeconfig"] == str(kubeconfig)
    assert seen["custom_env"] == "from-request"
    assert str(seen["finalizing"]) == "True"


async def test_ansible_args_and_verbosity_are_passed(runner: AnsibleRunner, tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    result = await runner.run(request_for(
        tmp_path, playbook="record.yml", watch_vars={"result_file": str(out)}, verbosity=3,
        ansible_args=("--extra-vars", "only_first='from args'")))

    assert result.succeeded, result.error
    assert json.loads(out.read_text())["only_first"] == "from args"
    assert result.artifact_dir is not None
    command = (result.artifact_dir / "command").read_text()
    assert "-vvv" in command


@pytest.mark.slow
async def test_artifacts_are_rotated_and_removed(runner: AnsibleRunner, tmp_path: Path) -> None:
    runs, keep = 10, 3  # seven rotations, each checked
    durations: list[float] = []
    last: RunResult | None = None
    for _ in range(runs):
        last = await runner.run(request_for(tmp_path, playbook="trivial.yml", max_artifacts=keep))
        assert last.succeeded, last.error
        durations.append(last.duration)
        assert len(run_dirs(tmp_path)) <= keep

    assert last is not None
    kept = run_dirs(tmp_path)
    assert len(kept) == keep
    assert kept[-1].name == last.artifact_ident
    print(f"\nper-run time over {runs} runs: mean {sum(durations) / runs:.2f} s, "
          f"min {min(durations):.2f} s, max {max(durations):.2f} s")

    assert artifacts.remove_artifacts(tmp_path / "artifacts", make_cr())
    assert run_dirs(tmp_path) == []
    assert not (tmp_path / "artifacts" / GVK.group).exists()


async def test_zero_max_artifacts_keeps_everything(runner: AnsibleRunner, tmp_path: Path) -> None:
    for _ in range(3):
        result = await runner.run(request_for(tmp_path, playbook="trivial.yml", max_artifacts=0))
        assert result.succeeded, result.error
    assert len(run_dirs(tmp_path)) == 3


def process_gone(pid: int, within: float) -> bool:
    """Whether ``pid`` has exited (a zombie waiting for init to reap it counts as exited)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


async def wait_for_file(path: Path, within: float) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} was not written within {within} s")


@pytest.mark.parametrize("event_type", [threading.Event, asyncio.Event])
async def test_cancel_signal_stops_a_long_run(
    runner: AnsibleRunner, tmp_path: Path, event_type: type[threading.Event] | type[asyncio.Event],
) -> None:
    pid_file = tmp_path / "sleep.pid"
    cancel = event_type()
    task = asyncio.create_task(runner.run(
        request_for(tmp_path, playbook="sleep.yml", watch_vars={"pid_file": str(pid_file)}), cancel))
    pid = await wait_for_file(pid_file, 20)
    cancelled_at = time.monotonic()
    cancel.set()
    result = await asyncio.wait_for(task, 10)

    assert time.monotonic() - cancelled_at < 5
    assert result.cancelled
    assert not result.succeeded
    assert result.error is not None and "cancelled" in result.error
    assert process_gone(pid, 5), "the sleeping task's process must be killed"


async def test_cancelling_the_awaiting_task_stops_the_run(runner: AnsibleRunner, tmp_path: Path) -> None:
    pid_file = tmp_path / "sleep.pid"
    task = asyncio.create_task(runner.run(
        request_for(tmp_path, playbook="sleep.yml", watch_vars={"pid_file": str(pid_file)})))
    pid = await wait_for_file(pid_file, 20)
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert time.monotonic() - cancelled_at < 5
    assert process_gone(pid, 1), "the run must be over when the cancelled task finishes"


async def test_already_cancelled_request_does_not_start(runner: AnsibleRunner, tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    result = await runner.run(request_for(tmp_path, playbook="trivial.yml"), cancel)

    assert result.cancelled
    assert run_dirs(tmp_path) == []


async def test_timeout_stops_a_long_run(tmp_path: Path, isolated_home: Path) -> None:
    runner = AnsibleRunner(timeout=2, work_dir=tmp_path, project_dir=tmp_path)
    try:
        started = time.monotonic()
        result = await runner.run(request_for(
            tmp_path, playbook="sleep.yml", watch_vars={"pid_file": str(tmp_path / "pid")}))
    finally:
        await runner.close()

    assert time.monotonic() - started < 15
    assert not result.succeeded
    assert not result.cancelled
    assert result.error is not None and "time limit of 2 s" in result.error


async def test_close_cancels_runs_in_flight(tmp_path: Path, isolated_home: Path) -> None:
    runner = AnsibleRunner(work_dir=tmp_path, project_dir=tmp_path)
    pid_file = tmp_path / "sleep.pid"
    task = asyncio.create_task(runner.run(
        request_for(tmp_path, playbook="sleep.yml", watch_vars={"pid_file": str(pid_file)})))
    await wait_for_file(pid_file, 20)
    await asyncio.wait_for(runner.close(), 10)

    assert (await task).cancelled
    with pytest.raises(RuntimeError):
        await runner.run(request_for(tmp_path, playbook="trivial.yml"))


@pytest.fixture
def sentinel_sigterm() -> Iterator[Any]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise AssertionError("must not be called")

    previous = signal.signal(signal.SIGTERM, handler)
    previous_int = signal.getsignal(signal.SIGINT)
    yield handler
    signal.signal(signal.SIGTERM, previous)
    signal.signal(signal.SIGINT, previous_int)


async def test_signal_handlers_are_untouched(
    runner: AnsibleRunner, tmp_path: Path, sentinel_sigterm: Any
) -> None:
    sigint_before = signal.getsignal(signal.SIGINT)

    async_result = await runner.run(request_for(tmp_path, playbook="trivial.yml"))
    blocking_result = runner.run_blocking(request_for(tmp_path, playbook="trivial.yml"))  # in the main thread

    assert threading.current_thread() is threading.main_thread()
    assert async_result.succeeded and blocking_result.succeeded
    assert signal.getsignal(signal.SIGTERM) is sentinel_sigterm
    assert signal.getsignal(signal.SIGINT) is sigint_before
