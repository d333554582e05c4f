"""preview's pure parts: reading the CR, turning Ansible results into changes, projecting live objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.preview import preview
from hybrid_operator.preview.guard import dry_run_query

pytestmark = pytest.mark.unit

CR = {"apiVersion": "example.com/v1", "kind": "Database", "metadata": {"name": "orders", "namespace": "default"}}


def ok(res: dict[str, Any], action: str = "kubernetes.core.k8s") -> dict[str, Any]:
    return {"event": "runner_on_ok", "event_data": {"task": "t", "task_action": action, "res": res}}


STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "orders", "namespace": "default"}}


@pytest.mark.parametrize(("event", "expected"), [
    (ok({"changed": False, "method": "update"}), None),
    ({"event": "runner_on_skipped", "event_data": {"res": {"changed": True}}}, None),
    (ok({"changed": True, "method": "create", "result": STS, "diff": {}}),
     preview.Change("create", "apps/v1", "StatefulSet", "default", "orders", None, STS)),
    (ok({"changed": True, "method": "update", "result": STS,
         "diff": {"before": {"spec": {"replicas": 1}, "metadata": {"resourceVersion": "5", "generation": 1}},
                  "after": {"spec": {"replicas": 3}, "metadata": {"resourceVersion": "5", "generation": 2}}}}),
     preview.Change("update", "apps/v1", "StatefulSet", "default", "orders", {"spec": {"replicas": 1}},
                    {"spec": {"replicas": 3}})),
    (ok({"changed": True, "method": "delete", "result": {}, "diff": {"before": STS, "after": {}}}),
     preview.Change("delete", "apps/v1", "StatefulSet", "default", "orders", STS, None)),
    (ok({"changed": True, "result": {"status": {"ready": True}},
         "invocation": {"module_args": {"status": {"ready": False}}}}, "operator_sdk.util.k8s_status"),
     preview.Change("status", "example.com/v1", "Database", "default", "orders", {"status": {"ready": True}},
                    {"status": {"ready": False}})),
])
def test_change_of(event: dict[str, Any], expected: preview.Change | None) -> None:
    assert preview.change_of(event, CR) == expected


def test_other_changed_tasks_are_reported_as_tasks() -> None:
    change = preview.change_of(ok({"changed": True}, "ansible.builtin.command"), CR)
    assert change is not None and change.action == "task" and "ansible.builtin.command" in change.kind


@pytest.mark.parametrize(("live", "desired", "expected"), [
    ({"a": 1, "b": 2, "status": {}}, {"a": 1}, {"a": 1}),
    ({"spec": {"replicas": 2, "x": 1}}, {"spec": {"replicas": 3}}, {"spec": {"replicas": 2}}),
    ({"l": [{"n": 1, "d": "default"}]}, {"l": [{"n": 1}]}, {"l": [{"n": 1}]}),
    ({"l": [1, 2]}, {"l": [1]}, {"l": [1, 2]}),
    ({"m": {}}, {"m": {"k": "v"}}, {"m": {}}),
])
def test_projected_keeps_only_what_the_chart_sets(live: Any, desired: Any, expected: Any) -> None:
    assert preview.projected(live, desired) == expected


def test_report_lists_diffs_and_counts() -> None:
    text = preview.report([preview.Change("update", "apps/v1", "StatefulSet", "default", "orders",
                                          {"spec": {"replicas": 1}}, {"spec": {"replicas": 3}}),
                           preview.Change("create", "v1", "ConfigMap", "default", "c", None, {"data": {"a": "b"}})])
    assert "~ update apps/v1 StatefulSet default/orders\n" in text
    assert "    -  replicas: 1\n" in text and "    +  replicas: 3\n" in text
    assert "+ create v1 ConfigMap default/c\n" in text
    assert text.endswith("2 change(s): 1 to create, 1 to update, 0 to delete\n")
    assert preview.report([]).startswith("no changes")


@pytest.mark.parametrize(("text", "message"), [
    ("kind: Database\nmetadata: {name: x}\n", "needs apiVersion, kind and metadata.name"),
    ("a: 1\n---\nb: 2\n", "exactly one custom resource, found 2"),
    ("a: [\n", "cannot read"),
])
def test_read_cr_refuses_bad_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cr.yaml"
    path.write_text(text)
    with pytest.raises(preview.PreviewError, match=message):
        preview.read_cr(path, None)


def test_read_cr_namespace_flag_then_file_then_default(tmp_path: Path) -> None:
    path = tmp_path / "cr.yaml"
    path.write_text("apiVersion: v1x\nkind: K\nmetadata: {name: a, namespace: fromfile}\n")
    assert preview.read_cr(path, "flag")["metadata"]["namespace"] == "flag"
    assert preview.read_cr(path, None)["metadata"]["namespace"] == "fromfile"
    path.write_text("apiVersion: v1x\nkind: K\nmetadata: {name: a}\n")
    assert preview.read_cr(path, None)["metadata"]["namespace"] == "default"


def test_merged_cr_takes_spec_and_labels_from_the_file() -> None:
    live = {**CR, "metadata": {**CR["metadata"], "uid": "u1", "labels": {"a": "1"}}, "spec": {"replicas": 1},
            "status": {"ready": True}}
    wanted = {**CR, "metadata": {**CR["metadata"], "labels": {"b": "2"}}, "spec": {"replicas": 3}}
    merged = preview.merged_cr(wanted, live)
    assert merged["spec"] == {"replicas": 3} and merged["status"] == {"ready": True}
    assert merged["metadata"]["uid"] == "u1" and merged["metadata"]["labels"] == {"b": "2"}


@pytest.mark.parametrize(("query", "expected"), [
    ({}, [("dryRun", "All")]),
    ({"fieldManager": "x", "dryRun": ""}, [("fieldManager", "x"), ("dryRun", "All")]),
])
def test_writes_always_carry_dry_run_all(query: dict[str, str], expected: list[tuple[str, str]]) -> None:
    assert dry_run_query(query) == expected


def test_a_new_resource_is_previewed_as_its_creation_with_the_status_it_would_get() -> None:
    cr = {**CR, "spec": {"engine": "postgres"}}
    status = preview.Change("status", "example.com/v1", "Database", "default", "orders", {"status": {}},
                            {"status": {"phase": "Ready"}})
    child = preview.Change("create", "apps/v1", "StatefulSet", "default", "orders", None, STS)
    changes = preview.with_creation(cr, [status, child])
    assert changes == [preview.Change("create", "example.com/v1", "Database", "default", "orders", None,
                                      {**cr, "status": {"phase": "Ready"}}), child]
    assert preview.report(changes).startswith("+ create example.com/v1 Database default/orders\n")
    assert "2 change(s): 2 to create, 0 to update, 0 to delete" in preview.report(changes)


def test_preview_finds_the_cluster_as_the_other_commands_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    given = tmp_path / "given"
    assert preview.kubeconfig_for(given, {"KUBECONFIG": "/env"}) == given
    assert preview.kubeconfig_for(None, {"KUBECONFIG": "/env"}) == Path("/env")
    assert preview.kubeconfig_for(None, {}) is None
    (tmp_path / ".hybrid").mkdir()
    (tmp_path / ".hybrid" / "kubeconfig").write_text("apiVersion: v1\n")
    assert preview.kubeconfig_for(None, {}) == Path(".hybrid/kubeconfig")
