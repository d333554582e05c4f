"""Ansible's kubernetes.core modules work against `hybrid-operator cluster`.

Ansible operators are playbooks full of ``kubernetes.core.k8s`` and
``k8s_info`` tasks, so the real ``ansible-playbook`` binary runs the playbooks
under ``playbooks/`` against the server process; each test checks both what
the module reported (the JSON stdout callback) and what kubectl then sees.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.cluster import Cluster, find_binary

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
PLAYBOOKS = HERE / "playbooks"
MANIFESTS = HERE / "manifests"


@dataclass
class PlaybookRun:
    """The per-task results of one ``ansible-playbook`` run, as the json callback printed them."""

    results: list[tuple[str, dict[str, Any]]]
    stats: dict[str, Any]

    def task(self, name: str) -> dict[str, Any]:
        found = [result for task, result in self.results if task == name]
        assert len(found) == 1, f"task {name!r} ran {len(found)} times: {[task for task, _ in self.results]}"
        return found[0]


def run_playbook(cluster: Cluster, workdir: Path, playbook: str, *args: str, **extra_vars: Any) -> PlaybookRun:
    workdir.mkdir(parents=True, exist_ok=True)
    env = cluster.env()
    env.update(HOME=str(workdir), K8S_AUTH_KUBECONFIG=str(cluster.kubeconfig), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
               ANSIBLE_LOCAL_TEMP=str(workdir / "tmp"), ANSIBLE_RETRY_FILES_ENABLED="False",
               ANSIBLE_DEPRECATION_WARNINGS="False")
    variables = {"manifests": str(MANIFESTS), **extra_vars}
    command = [find_binary("ansible-playbook"), str(PLAYBOOKS / playbook), "-e", json.dumps(variables), *args]
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=300, cwd=workdir)
    if done.returncode != 0:
        pytest.fail(f"ansible-playbook {playbook} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    output = json.loads(done.stdout)
    results = [(task["task"]["name"], task["hosts"]["localhost"])
               for play in output["plays"] for task in play["tasks"]]
    return PlaybookRun(results, output["stats"]["localhost"])


@pytest.fixture(scope="module")
def cluster(shared_cluster: Cluster) -> Cluster:
    """The module's shared cluster, with this module's CRDs installed (overrides the per-test fixture)."""
    shared_cluster.kubectl("apply", "-f", str(MANIFESTS / "crd-database.yaml"))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd/databases.example.com")
    return shared_cluster


@pytest.fixture(scope="module")
def lifecycle(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> PlaybookRun:
    return run_playbook(cluster, tmp_path_factory.mktemp("lifecycle"), "lifecycle.yml", ns="life")


def test_lifecycle_playbook_has_no_failures(lifecycle: PlaybookRun) -> None:
    assert lifecycle.stats["failures"] == 0
    assert lifecycle.stats["ok"] == len(lifecycle.results) == 10


def test_create_then_idempotent_rerun(lifecycle: PlaybookRun) -> None:
    created = lifecycle.task("create configmap")
    assert created["changed"] is True
    assert created["result"]["metadata"]["uid"]
    again = lifecycle.task("create configmap again")
    assert again["changed"] is False
    assert again["result"]["metadata"]["resourceVersion"] == created["result"]["metadata"]["resourceVersion"]


def test_update_is_visible_via_kubectl(lifecycle: PlaybookRun, cluster: Cluster) -> None:
    updated = lifecycle.task("update configmap")
    assert updated["changed"] is True
    assert updated["result"]["data"] == {"color": "green", "size": "large"}
    live = cluster.get_json("configmap", "settings", "-n", "life")
    assert live["data"] == {"color": "green", "size": "large"}
    assert live["metadata"]["labels"] == {"app": "demo"}  # a patch keeps what the update did not mention


def test_custom_resource_update_falls_back_to_merge_patch(lifecycle: PlaybookRun, cluster: Cluster) -> None:
    # the module tries a strategic merge patch first; the server must refuse it for a custom resource
    refused = cluster.kubectl("patch", "db", "orders", "-n", "life", "--type=strategic",
                              "-p", '{"spec":{"replicas":4}}', check=False)
    assert refused.returncode != 0
    assert "UnsupportedMediaType" in refused.stderr or "unknown format" in refused.stderr
    updated = lifecycle.task("update database")
    assert updated["changed"] is True
    assert updated["result"]["metadata"]["generation"] == 2
    live = cluster.get_json("db", "orders", "-n", "life")
    assert live["spec"] == {"engine": "postgres", "version": "16", "replicas": 3, "storage": "1Gi"}


def test_wait_returns_a_ready_deployment(lifecycle: PlaybookRun) -> None:
    for task, generation, image in [("create deployment and wait", 1, "nginx:1.25"),
                                    ("update deployment and wait", 2, "nginx:1.26")]:
        result = lifecycle.task(task)
        assert result["changed"] is True
        assert result["duration"] < 30
        deployment = result["result"]
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
        assert deployment["status"]["observedGeneration"] == generation
        assert deployment["status"]["readyReplicas"] == deployment["spec"]["replicas"]


def test_absent_with_wait_deletes(lifecycle: PlaybookRun, cluster: Cluster) -> None:
    deleted = lifecycle.task("delete deployment and wait")
    assert deleted["changed"] is True
    assert lifecycle.task("delete deployment again")["changed"] is False
    missing = cluster.kubectl("get", "deployment", "web", "-n", "life", check=False)
    assert "NotFound" in missing.stderr


@pytest.fixture(scope="module")
def applied(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> PlaybookRun:
    cluster.kubectl("create", "namespace", "apply")
    return run_playbook(cluster, tmp_path_factory.mktemp("apply"), "apply.yml", ns="apply")


def test_client_side_apply_removes_dropped_keys(applied: PlaybookRun, cluster: Cluster) -> None:
    assert applied.task("apply configmap")["changed"] is True
    assert applied.task("reapply configmap without a key")["changed"] is True
    assert applied.task("reapply unchanged configmap")["changed"] is False
    live = cluster.get_json("configmap", "applied", "-n", "apply")
    assert live["data"] == {"keep": "1", "added": "3"}
    last = json.loads(live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["data"] == {"keep": "1", "added": "3"}


def test_server_side_apply_records_field_manager(applied: PlaybookRun, cluster: Cluster) -> None:
    first = applied.task("server-side apply database")
    assert first["changed"] is True
    assert applied.task("server-side apply database without storage")["changed"] is True
    live = cluster.get_json("db", "ssa", "-n", "apply", "--show-managed-fields")
    assert live["spec"] == {"engine": "mysql", "version": "8.4", "replicas": 1}  # storage released, default kept
    managers = {(entry["manager"], entry["operation"]) for entry in live["metadata"]["managedFields"]}
    assert ("ansible-test", "Apply") in managers
    deployment = applied.task("server-side apply deployment")["result"]
    assert deployment["metadata"]["managedFields"][0]["manager"] == "ansible-test"
    assert cluster.get_json("deployment", "web", "-n", "apply")["spec"]["replicas"] == 1


SELECTORS: list[tuple[list[str], list[str]]] = [
    (["app=x"], ["alpha"]),
    (["app!=x"], ["beta", "gamma"]),
    (["app in (x,y)"], ["alpha", "beta"]),
    (["app notin (x)", "tier"], ["beta"]),
    (["!tier"], ["gamma"]),
    (["app!=x", "tier!=db"], ["gamma"]),
]


@pytest.fixture(scope="module")
def info(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> PlaybookRun:
    cluster.kubectl("create", "namespace", "info")
    return run_playbook(cluster, tmp_path_factory.mktemp("info"), "info.yml", ns="info",
                        selectors=[selector for selector, _ in SELECTORS])


@pytest.mark.parametrize(("selector", "expected"), SELECTORS, ids=[",".join(s) for s, _ in SELECTORS])
def test_k8s_info_label_selectors(info: PlaybookRun, selector: list[str], expected: list[str]) -> None:
    by_selector = {tuple(loop["item"]): loop for loop in info.task("query {{ item }}")["results"]}
    names = sorted(item["metadata"]["name"] for item in by_selector[tuple(selector)]["resources"])
    assert [name for name in names if name != "kube-root-ca.crt"] == expected


def test_k8s_info_by_field_selector_and_name(info: PlaybookRun) -> None:
    assert [r["metadata"]["name"] for r in info.task("query by field selector")["resources"]] == ["beta"]
    gamma = info.task("get one by name")["resources"]
    assert [(r["metadata"]["name"], r["metadata"]["labels"]) for r in gamma] == [("gamma", {"app": "z"})]
    assert info.task("get a missing one")["resources"] == []


@pytest.fixture(scope="module")
def existing_version(cluster: Cluster) -> str:
    cluster.kubectl("create", "namespace", "check")
    cluster.kubectl("create", "configmap", "existing", "-n", "check", "--from-literal=color=blue")
    return str(cluster.get_json("configmap", "existing", "-n", "check")["metadata"]["resourceVersion"])


@pytest.fixture(scope="module")
def checked(cluster: Cluster, existing_version: str, tmp_path_factory: pytest.TempPathFactory) -> PlaybookRun:
    return run_playbook(cluster, tmp_path_factory.mktemp("check"), "check.yml", "--check", ns="check")


def test_check_mode_create_is_a_server_dry_run(checked: PlaybookRun, cluster: Cluster) -> None:
    created = checked.task("dry-run create deployment")
    assert created["changed"] is True
    deployment = created["result"]
    # only the server fills in a uid and the built-in defaults: the module sent dryRun=All
    assert deployment["metadata"]["uid"]
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert "NotFound" in cluster.kubectl("get", "deployment", "web", "-n", "check", check=False).stderr


def test_check_mode_update_and_delete_persist_nothing(checked: PlaybookRun, cluster: Cluster,
                                                      existing_version: str) -> None:
    updated = checked.task("dry-run update configmap")
    assert updated["changed"] is True
    assert updated["result"]["data"] == {"color": "red"}
    assert checked.task("dry-run delete configmap")["changed"] is True
    live = cluster.get_json("configmap", "existing", "-n", "check")
    assert live["data"] == {"color": "blue"}
    assert live["metadata"]["resourceVersion"] == existing_version
