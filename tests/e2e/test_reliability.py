"""Issue 13, items 2-7, end to end: the operator and the embedded cluster as processes, faults injected.

Each test reproduces one defect of issue 13 through the real entry points (kill -9, a stopped API
server, a second kind, a Ctrl-C) and checks what a user sees: processes, releases, conditions,
Events, exit codes and log lines.  The figures (how many, how fast) are `make chaos`'s business;
these tests only say yes or no.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator import processes
from support.cluster import Cluster, free_port
from support.operator import OperatorProcess, apply, condition, get_or_none, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "reliability"
WATCHES = FIXTURES / "watches.yaml"
GROUP = "rel.e2e.hybrid.dev"
PERIOD = {"Slow": "ansible.sdk.operatorframework.io/reconcile-period"}
HELM_PERIOD = "helm.sdk.operatorframework.io/reconcile-period"

StartOperator = Callable[..., OperatorProcess]


@pytest.fixture
def cluster(own_cluster: Cluster) -> Cluster:
    """A server of each test's own: these tests stop it, and use its default namespace and release names."""
    return own_cluster


def cr(kind: str, name: str, spec: dict[str, Any] | None = None, period: str = "10m") -> dict[str, Any]:
    annotation = PERIOD.get(kind, HELM_PERIOD)
    return {"apiVersion": f"{GROUP}/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "default", "annotations": {annotation: period}},
            "spec": spec or {}}


def crds(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", str(FIXTURES / "crds.yaml"))


def processes_with(*needles: str) -> list[int]:
    """Pids of live processes whose command line contains every needle."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z" and all(needle in command for needle in needles):
            found.append(int(entry.name))
    return found


def kill9(operator: OperatorProcess) -> None:
    operator.process.kill()
    operator.process.wait(timeout=10)


def messages(operator: OperatorProcess, logger_prefix: str = "hybrid_operator") -> list[str]:
    return [str(r.get("msg")) for r in operator.log_records() if str(r.get("logger", "")).startswith(logger_prefix)]


def with_condition(cluster: Cluster, kind: str, name: str, kind_of: str, state: str = "True") -> dict[str, Any] | None:
    obj = get_or_none(cluster, f"{kind.lower()}s.{GROUP}", name, "-n", "default")
    found = condition(obj, kind_of) if obj else None
    return obj if found and found.get("status") == state else None


def release(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    result = cluster.helm("history", name, "-n", "default", "-o", "json", check=False)
    return list(json.loads(result.stdout)) if result.returncode == 0 else []


# -- item 2: helm and playbooks do not outlive their operator -----------------------------------------


def test_helm_dies_with_a_killed_operator(tmp_path: Path, start_operator: StartOperator) -> None:
    """Without controllers the pre-install hook Job never completes: helm waits for it (a minute)."""
    cluster = Cluster(tmp_path / "cluster", extra_args=("--no-controllers",))
    cluster.start()
    try:
        crds(cluster)
        operator = start_operator(cluster, WATCHES, "--helm-timeout", "60s")
        apply(cluster, cr("Hooked", "waits"))
        kubeconfig = str(operator.artifacts / "kubeconfig")
        helm = wait_for(lambda: processes_with("helm", "install", "waits", kubeconfig), "helm install to run")
        kill9(operator)
        deadline = time.monotonic() + 10
        while processes_with("helm", "install", "waits", kubeconfig) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not processes_with("helm", "install", "waits", kubeconfig), f"helm {helm} outlived its operator"
    finally:
        cluster.stop()


def test_a_new_operator_stops_what_the_killed_one_left_and_sweeps_its_leftovers(
        cluster: Cluster, start_operator: StartOperator, tmp_path: Path) -> None:
    crds(cluster)
    # cold runs: a warm run's process sees its operator go and stops the playbook itself, so nothing would be
    # left to sweep; an ansible-playbook exec'd by a cold run survives a kill -9 of its operator
    operator = start_operator(cluster, WATCHES, "--ansible-runner", "cold")
    apply(cluster, cr("Slow", "kept"))
    apply(cluster, cr("Slow", "deleted"))
    for name in ("kept", "deleted"):
        wait_for(lambda name=name: (get_or_none(cluster, f"slows.{GROUP}", name) or {}).get("status", {})
                 .get("done") is not None, f"the first run of {name}")
    artifacts = operator.artifacts / GROUP / "v1" / "Slow" / "default"
    assert (artifacts / "kept").is_dir() and (artifacts / "deleted").is_dir()
    apply(cluster, cr("Slow", "kept", {"seconds": 120}))
    scope = processes.scope_of(operator.artifacts)  # what the operator's children carry in their environment
    wait_for(lambda: set(processes.leftovers(scope)) & set(processes_with("sleep", "120")),
             "the playbook to be sleeping")
    run = operator.runs("kept")
    left = set(processes.leftovers(scope))
    credentials = set((operator.artifacts / "run-credentials").iterdir())
    kill9(operator)
    cluster.kubectl("delete", f"slows.{GROUP}", "deleted")
    time.sleep(1)
    assert left & set(processes_with("")), "a killed operator leaves its playbook running"
    assert credentials, "and the run's kubeconfig"

    # the same artifacts directory; a short shutdown for the run the successor starts itself
    successor = OperatorProcess(cluster, WATCHES, tmp_path, "--graceful-shutdown-timeout", "1s")
    try:
        wait_for(lambda: not left & set(processes_with("")), "the leftover playbook to go", timeout=60)
        wait_for(lambda: not (artifacts / "deleted").exists(), "the artifacts of the deleted resource to go",
                 timeout=60)
        assert (artifacts / "kept").is_dir(), "the artifacts of a live resource stay"
        assert not credentials & set((operator.artifacts / "run-credentials").iterdir())
        assert len(run) == 1, "the killed run never finished"
    finally:
        successor.stop()


def test_a_warm_run_stops_its_playbook_when_the_operator_is_killed(
        cluster: Cluster, start_operator: StartOperator) -> None:
    crds(cluster)
    operator = start_operator(cluster, WATCHES)  # --ansible-runner=warm, the default
    apply(cluster, cr("Slow", "kept", {"seconds": 120}))
    scope = processes.scope_of(operator.artifacts)
    wait_for(lambda: set(processes.leftovers(scope)) & set(processes_with("sleep", "120")),
             "the playbook to be sleeping")
    left = set(processes.leftovers(scope))
    kill9(operator)
    wait_for(lambda: not left & set(processes_with("")), "the worker, its run and the playbook to go", timeout=30)


# -- item 3: release-name collisions --------------------------------------------------------------------


def test_two_kinds_never_share_a_release_and_a_hand_made_one_is_left_alone(cluster: Cluster,
                                                                          start_operator: StartOperator) -> None:
    crds(cluster)
    operator = start_operator(cluster, WATCHES)
    apply(cluster, cr("Echo", "same", period="1s"))
    wait_for(lambda: with_condition(cluster, "Echo", "same", "Deployed"), "the Echo release")
    apply(cluster, cr("Twin", "same", period="1s"))
    refused = wait_for(lambda: with_condition(cluster, "Twin", "same", "Irreconcilable"), "Twin to be refused")
    message = str(condition(refused, "Irreconcilable")["message"])  # type: ignore[index]
    assert "duplicate release name" in message and "Echo.rel.e2e.hybrid.dev" in message
    time.sleep(6)  # several resyncs of both
    assert [r["chart"] for r in release(cluster, "same")] == ["echo-0.1.0"], "one revision, Echo's chart"
    cluster.kubectl("delete", f"twins.{GROUP}", "same")
    time.sleep(2)
    assert [r["status"] for r in release(cluster, "same")] == ["deployed"], "Twin's deletion left Echo's release"
    assert get_or_none(cluster, "configmap", "same-echo") is not None

    cluster.helm("install", "manual", str(FIXTURES / "charts" / "echo"), "-n", "default")
    apply(cluster, cr("Echo", "manual", period="1s"))
    refused = wait_for(lambda: with_condition(cluster, "Echo", "manual", "Irreconcilable"), "a hand-made release")
    assert "not installed by this operator" in str(condition(refused, "Irreconcilable")["message"])  # type: ignore[index]
    cluster.kubectl("delete", f"echos.{GROUP}", "manual")
    wait_for(lambda: get_or_none(cluster, f"echos.{GROUP}", "manual") is None, "the Echo CR to go")
    assert [r["revision"] for r in release(cluster, "manual")] == [1], "the person's release is untouched"
    assert operator.process.poll() is None


# -- item 4: one big object does not kill a dependent watch -------------------------------------------------


def test_a_700_kb_configmap_does_not_stop_drift_repair(cluster: Cluster, start_operator: StartOperator) -> None:
    crds(cluster)
    operator = start_operator(cluster, WATCHES)
    apply(cluster, cr("Echo", "watched"))  # no resync for ten minutes: only the dependent watch repairs
    wait_for(lambda: with_condition(cluster, "Echo", "watched", "Deployed"), "the Echo release")
    wait_for(lambda: any(r.get("msg") == "dependent watch started" for r in operator.log_records()),
             "the dependent watch")
    time.sleep(1)
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "default"},
           "data": {"blob": "x" * 700_000}}
    cluster.kubectl("create", "-f", "-", input_text=json.dumps(big))
    time.sleep(2)
    cluster.kubectl("delete", "configmap", "watched-echo")
    wait_for(lambda: get_or_none(cluster, "configmap", "watched-echo"), "the deleted ConfigMap to come back",
             timeout=30)
    assert operator.stop() == 0


# -- item 5: Events are counted, not copied ---------------------------------------------------------------


def test_repeated_reconciles_count_one_event(cluster: Cluster, start_operator: StartOperator) -> None:
    crds(cluster)
    operator = start_operator(cluster, WATCHES)
    apply(cluster, cr("Slow", "often", period="1s"))
    wait_for(lambda: len(operator.runs("often")) >= 4, "four runs", timeout=120)
    found = cluster.get_json("events", "-n", "default", "--field-selector",
                             "involvedObject.name=often,reason=ReconcileSucceeded")["items"]
    counts = sorted(int(e.get("count") or 1) for e in found)
    # the first run changes the status (changed=1), the next ones do not: two messages, two Events
    assert len(found) <= 2 and sum(counts) >= 4 and counts[-1] >= 3, counts


# -- item 7: an outage is one warning; Ctrl-C on up stops everything cleanly ---------------------------------


def test_an_api_outage_is_one_warning_and_one_reconnected(cluster: Cluster, start_operator: StartOperator) -> None:
    crds(cluster)
    operator = start_operator(cluster, WATCHES)
    apply(cluster, cr("Slow", "ticking", period="1s"))
    wait_for(lambda: len(operator.runs("ticking")) >= 2, "runs before the outage", timeout=120)
    cluster.stop()
    time.sleep(12)
    cluster.start()
    ran = len(operator.runs("ticking"))
    wait_for(lambda: len(operator.runs("ticking")) >= ran + 2, "runs after the outage", timeout=120)
    said = messages(operator)
    assert "reconcile crashed" not in said
    assert said.count("API server unreachable") == 1, [m for m in said if "reach" in m]
    assert said.count("API server reachable again") == 1
    assert not [r for r in operator.log_records() if r.get("exc_info") or "Traceback" in str(r.get("error", ""))]
    # kopf's watches retry every request; those retries used to be logged at ERROR, four a second
    assert not [r for r in operator.log_records() if r.get("level") == "error" and "will retry" in str(r.get("msg"))]


def up_arguments(tmp_path: Path) -> list[str]:
    """`up` on a free port with one sample whose playbook sleeps 8 s (so a Ctrl-C lands mid-reconcile)."""
    project = tmp_path / "project"
    (project / "crds").mkdir(parents=True)
    (project / "samples").mkdir()
    (project / "crds" / "crds.yaml").write_text((FIXTURES / "crds.yaml").read_text())
    (project / "samples" / "slow.yaml").write_text(json.dumps(cr("Slow", "busy", {"seconds": 8})))
    return ["up", "--port", str(free_port()),
            "--data-dir", str(tmp_path / "data"), "--kubeconfig", str(tmp_path / "kubeconfig"),
            "--crd-dir", str(project / "crds"), "--samples-dir", str(project / "samples"), "--no-summary",
            "--watches-file", str(WATCHES), "--artifacts-dir", str(tmp_path / "runner"),
            "--metrics-bind-address", "0", "--health-probe-bind-address", "0"]


def wait_for_the_sleeping_playbook(tmp_path: Path) -> None:
    scope = processes.scope_of(tmp_path / "runner")
    wait_for(lambda: [pid for pid in processes.leftovers(scope) if pid in processes_with("sleep", "8")],
             "the sample's playbook to run", timeout=120)


def assert_stopped_cleanly(tmp_path: Path, code: int, output: str) -> None:
    assert code == 0, output[-3000:]
    assert "Traceback" not in output and "reconcile crashed" not in output, output[-3000:]
    assert not processes_with("hybrid_operator.cli", "cluster", str(tmp_path / "data")), "the cluster was stopped"
    assert not processes.leftovers(processes.scope_of(tmp_path / "runner")), "the playbook was stopped"


def test_ctrl_c_on_up_stops_the_operator_then_the_cluster_and_exits_0(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "hybrid_operator.cli", *up_arguments(tmp_path)]
    log = tmp_path / "up.log"
    with log.open("wb") as out:  # a terminal's foreground job: its own process group, SIGINT to all of it
        up = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                              start_new_session=True)
    try:
        wait_for_the_sleeping_playbook(tmp_path)
        os.killpg(up.pid, signal.SIGINT)
        code = up.wait(timeout=90)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait(timeout=10)
    assert_stopped_cleanly(tmp_path, code, log.read_text(errors="replace"))


def test_ctrl_c_in_a_terminal_stops_make_run_with_exit_0(tmp_path: Path) -> None:
    """The keystroke, not a signal to one pid: make and `up` share the terminal, as under `make run`.

    The terminal's line discipline sends SIGINT to its foreground process group. Without `up`
    taking that foreground for itself, make is in it too and ends with "Interrupt" and exit 2.
    """
    makefile = tmp_path / "Makefile"
    makefile.write_text(f"run:\n\t{sys.executable} -m hybrid_operator.cli $(ARGS)\n")
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    controller, terminal = pty.openpty()
    log = tmp_path / "make-run.log"
    with log.open("wb") as out:  # `setsid -c`: a session whose controlling terminal is stdin, as a shell's job has
        make = subprocess.Popen(["setsid", "-c", "make", "--no-print-directory", "-f", str(makefile), "run",
                                 "ARGS=" + " ".join(up_arguments(tmp_path))],
                                stdin=terminal, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    os.close(terminal)
    try:
        wait_for_the_sleeping_playbook(tmp_path)
        os.write(controller, b"\x03")  # Ctrl-C
        code = make.wait(timeout=90)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait(timeout=10)
        os.close(controller)
    output = log.read_text(errors="replace")
    assert "Interrupt" not in output, output[-3000:]
    assert_stopped_cleanly(tmp_path, code, output)
