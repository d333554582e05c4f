"""Ansible-backed kinds end to end: `hybrid-operator run` + the embedded cluster + kubectl.

What is proven here goes through the real entry points only: the operator
process started as a user starts it, CRs applied with kubectl, and what the
playbooks did read back with kubectl.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cluster import REPO, Cluster
from support.operator import OperatorProcess, apply, condition, get_or_none, open_crd, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
StartOperator = Callable[..., OperatorProcess]



def successful(cluster: Cluster, *ref: str) -> dict[str, Any] | None:
    obj = get_or_none(cluster, *ref)
    found = condition(obj, "Successful") if obj else None
    return obj if found and found["status"] == "True" else None



def e2e_cr(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A CR for the test's namespace (kubectl puts it there: the context's namespace)."""
    return {"apiVersion": "e2e.hybrid.dev/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


# -- the repository's own kinds: a role and a playbook side by side ----------------------------------


def test_website_role_and_realibox_playbook_lifecycle(cluster: Cluster, start_operator: StartOperator) -> None:
    cluster.kubectl("apply", "-f", str(REPO / "config" / "crd"))
    operator = start_operator(cluster, REPO / "watches.yaml")
    # the two samples checked here (the other kinds' samples have their own tests)
    samples = REPO / "config" / "samples"
    cluster.kubectl("apply", "-f", str(samples / "web_v1alpha1_website.yaml"),
                    "-f", str(samples / "test_v1_realibox.yaml"))

    site = wait_for(lambda: successful(cluster, "website", "hello"), "Website hello to succeed")
    running = condition(site, "Running")
    assert running is not None and running["reason"] == "Successful"
    assert running["message"] == "Awaiting next reconciliation"
    result = running["ansibleResult"]
    # the first run changes things; the deployment controller then annotates the new Deployment (its revision),
    # a dependent change that brings one more run, which changes nothing (as on a real cluster): either may show
    assert result["failures"] == 0 and result["ok"] >= 3
    failure = condition(site, "Failure")
    assert failure is not None and failure["status"] == "False"
    assert site["status"]["observedGeneration"] == 1
    # custom status written by the role through operator_sdk.util.k8s_status survives the conditions update
    assert site["status"]["url"] == f"http://hello-web.{cluster.namespace}"
    assert site["status"]["replicas"] == 2

    deployment = cluster.get_json("deployment", "hello-web")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    content = cluster.get_json("configmap", "hello-content")
    assert content["data"]["index.html"] == "Hello, hybrid-operator"
    assert "web.example.com/cleanup" in site["metadata"]["finalizers"]

    box = wait_for(lambda: successful(cluster, "realibox", "box-sample"), "Realibox box-sample to succeed")
    pod = cluster.get_json("pod", "box-sample-pod")
    assert pod["spec"]["containers"][0]["env"] == [{"name": "DOMAIN", "value": "example.realibox.com"},
                                                    {"name": "OSS", "value": "oss-bucket-1"},
                                                    {"name": "SIZE", "value": "small"}]
    # the spec's domain reaches the container as data (an environment variable), never as shell text
    assert "example.realibox.com" not in " ".join(pod["spec"]["containers"][0]["command"])
    assert condition(box, "Successful") is not None

    # a spec change reaches the objects
    cluster.kubectl("patch", "website", "hello", "--type", "merge", "-p",
                    json.dumps({"spec": {"replicas": 3, "message": "Changed", "image": "nginx:1.28"}}))
    wait_for(lambda: cluster.get_json("deployment", "hello-web")["spec"]["replicas"] == 3, "replicas to become 3")
    wait_for(lambda: cluster.get_json("configmap", "hello-content")["data"]["index.html"] == "Changed",
             "the page to change")
    def generation_two() -> dict[str, Any] | None:
        current = cluster.get_json("website", "hello")
        done = (condition(current, "Successful") or {}).get("status") == "True"
        return current if done and current["status"].get("observedGeneration") == 2 else None

    changed = wait_for(generation_two, "generation 2 to be reconciled")
    assert changed["status"]["replicas"] == 3
    assert cluster.get_json("deployment", "hello-web")["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "nginx:1.28"
    events = cluster.get_json("events", "--field-selector", "involvedObject.name=hello,reason=ReconcileSucceeded")
    assert events["items"], "a ReconcileSucceeded event is posted for each successful run"

    # deletion runs the finalizer playbook, which removes the children and posts its own event
    cluster.kubectl("delete", "website", "hello", "--wait=true", "--timeout=120s")
    assert get_or_none(cluster, "website", "hello") is None
    assert get_or_none(cluster, "deployment", "hello-web") is None
    assert get_or_none(cluster, "configmap", "hello-content") is None
    goodbye = cluster.get_json("events", "--field-selector", "reason=WebsiteRemoved")
    assert [e["involvedObject"]["name"] for e in goodbye["items"]] == ["hello"]
    finalizer_runs = [r for r in operator.runs("hello", "Website") if r.get("finalizer")]
    assert len(finalizer_runs) == 1 and finalizer_runs[0]["outcome"] == "finalized"
    website_dir = operator.artifacts / "web.example.com" / "v1alpha1" / "Website" / cluster.namespace / "hello"
    wait_for(lambda: not website_dir.exists(), "the deleted CR's artifacts to be removed")


# -- failures, status from playbooks, unsafe values ----------------------------------------------------


@pytest.fixture(scope="module")
def fixture_operator(shared_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """One operator for the fixture kinds, watching every namespace: each test's CRs live in its own."""
    for kind in ("Failing", "Broken", "Reporter", "Echo"):
        apply(shared_cluster, open_crd(kind))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")
    process = OperatorProcess(shared_cluster, FIXTURES / "watches.yaml", tmp_path_factory.mktemp("fixture-kinds"))
    yield process
    process.stop()


@pytest.fixture
def fixture_kinds(cluster: Cluster, fixture_operator: OperatorProcess) -> OperatorProcess:
    return fixture_operator


def test_failing_task_sets_failure_posts_event_and_backs_off(cluster: Cluster,
                                                             fixture_kinds: OperatorProcess) -> None:
    apply(cluster, e2e_cr("Failing", "f1", {"size": 1}))

    def failed() -> dict[str, Any] | None:
        obj = get_or_none(cluster, "failing", "f1")
        found = condition(obj, "Failure") if obj else None
        return obj if found and found["status"] == "True" else None

    obj = wait_for(failed, "Failure=True on f1")
    failure = condition(obj, "Failure")
    assert failure is not None
    assert failure["reason"] == "Failed"
    assert failure["message"] == "Check the credentials: the credentials for f1 were refused"
    assert failure["ansibleResult"]["failures"] == 1
    successful_condition = condition(obj, "Successful")
    assert successful_condition is not None and successful_condition["status"] == "False"
    events = wait_for(lambda: cluster.get_json("events", "--field-selector",
                                               "involvedObject.name=f1,reason=ReconcileFailed")["items"],
                      "a ReconcileFailed event")
    assert events[0]["type"] == "Warning"
    assert "Check the credentials" in events[0]["message"]
    assert "the credentials for f1 were refused" in events[0]["message"]

    # retries back off exponentially: the delays logged between runs grow 1 s, 2 s, 4 s, ...
    retries = wait_for(lambda: [r for r in fixture_kinds.log_records()
                                if r.get("msg") == "reconcile will retry" and r.get("cr") == "f1"][:3]
                       if len([r for r in fixture_kinds.log_records()
                               if r.get("msg") == "reconcile will retry" and r.get("cr") == "f1"]) >= 3 else None,
                       "three retries of f1", timeout=120)
    assert [r["retry_in"] for r in retries] == [1.0, 2.0, 4.0]
    runs = fixture_kinds.runs("f1", "Failing")
    assert all(r["outcome"] == "failed" for r in runs)
    assert 3 <= len(runs) <= 5, "no hot loop: runs are spaced by the backoff"


def test_playbook_that_cannot_run_ends_in_failure_not_running(cluster: Cluster,
                                                              fixture_kinds: OperatorProcess) -> None:
    apply(cluster, e2e_cr("Broken", "b1", {}))

    def failed() -> dict[str, Any] | None:
        obj = get_or_none(cluster, "broken", "b1")
        found = condition(obj, "Failure") if obj else None
        return obj if found and found["status"] == "True" else None

    obj = wait_for(failed, "Failure=True on b1")
    failure = condition(obj, "Failure")
    assert failure is not None
    assert "does_not_exist" in failure["message"]
    running = condition(obj, "Running")
    assert running is not None and running["status"] == "False", "not left stuck in Running"


def test_status_from_k8s_status_and_set_stats_both_land_and_survive(cluster: Cluster,
                                                                    fixture_kinds: OperatorProcess) -> None:
    apply(cluster, e2e_cr("Reporter", "r1", {"color": "blue"}))
    obj = wait_for(lambda: successful(cluster, "reporter", "r1"), "Reporter r1 to succeed")
    assert obj["status"]["fromModule"] == "blue"
    assert obj["status"]["fromStats"] == "blue"
    painted = condition(obj, "Painted")
    assert painted is not None and painted["reason"] == "ColorApplied" and painted["message"] == "painted blue"

    # the next run's condition updates keep both (and the playbook's own condition)
    cluster.kubectl("patch", "reporter", "r1", "--type", "merge", "-p", '{"spec":{"color":"green"}}')

    def second() -> dict[str, Any] | None:
        current = successful(cluster, "reporter", "r1")
        return current if current and current["status"].get("observedGeneration") == 2 else None

    obj = wait_for(second, "generation 2 of r1")
    assert obj["status"]["fromModule"] == "green"
    assert obj["status"]["fromStats"] == "green"
    assert condition(obj, "Painted") is not None
    assert [c["type"] for c in obj["status"]["conditions"]].count("Running") == 1


def test_artifacts_are_rotated_and_removed_with_the_cr(cluster: Cluster, fixture_kinds: OperatorProcess) -> None:
    apply(cluster, e2e_cr("Reporter", "r2", {"color": "red"}))
    wait_for(lambda: successful(cluster, "reporter", "r2"), "Reporter r2 to succeed")
    for index in range(3):
        cluster.kubectl("patch", "reporter", "r2", "--type", "merge", "-p", json.dumps({"spec": {"n": index}}))
        wait_for(lambda i=index: (successful(cluster, "reporter", "r2") or {}).get("status", {}).get(
            "observedGeneration") == i + 2, f"run {index + 2} of r2")
    runs = fixture_kinds.runs("r2", "Reporter")
    assert len(runs) >= 4
    directory = fixture_kinds.artifacts / "e2e.hybrid.dev" / "v1" / "Reporter" / cluster.namespace / "r2" / "artifacts"
    kept = [p for p in directory.iterdir() if p.is_dir()]
    assert 1 <= len(kept) <= 2, f"maxRunnerArtifacts: 2 keeps at most 2 run directories, found {len(kept)}"
    cluster.kubectl("delete", "reporter", "r2")
    wait_for(lambda: not directory.exists(), "r2's artifacts to be removed after deletion")


def test_spec_values_are_never_templated(cluster: Cluster, fixture_kinds: OperatorProcess) -> None:
    payload = "{{ lookup('pipe', 'id') }}"
    resource = e2e_cr("Echo", "e1", {"value": payload, "nested": {"inner": payload}})
    resource["metadata"]["annotations"] = {"ansible.sdk.operatorframework.io/verbosity": "3"}
    apply(cluster, resource)
    obj = wait_for(lambda: successful(cluster, "echo", "e1"), "Echo e1 to succeed")
    assert obj["status"]["echoed"] == payload
    assert obj["status"]["nestedEchoed"] == payload
    # verbosity 3 (the annotation) puts the task output into the operator's log
    outputs = [r for r in fixture_kinds.log_records() if r.get("msg") == "run output" and r.get("cr") == "e1"]
    assert outputs and "Echo the spec value back" in outputs[0]["output"]
