"""Unit tests for scripts/conformance_checkout.py: how ``make conformance`` translates an SDK test
operator's manager container, Dockerfile and test files for ``hybrid-operator run`` (synthetic
inputs written here, no checkout needed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "conformance_checkout.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_checkout", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["conformance_checkout"] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


cc: Any = _load()


def test_address_flags_move_to_loopback_ports_and_unknown_flags_are_dropped_with_a_note() -> None:
    notes = cc.Notes()
    ports = {"--metrics-bind-address": 4101, "--metrics-addr": 4102, "--health-probe-bind-address": 4103}
    args = ["--metrics-secure", "--metrics-bind-address=:8443", "--leader-elect",
            "--health-probe-bind-address=:6789", "--zap-devel", "--ansible-args='--vault-password-file /x'"]
    known = {"--metrics-secure", "--metrics-bind-address", "--leader-elect", "--health-probe-bind-address",
             "--ansible-args"}
    translated = cc.translate_args(args, known, ports, notes)
    assert translated == ["--metrics-secure", "--metrics-bind-address=127.0.0.1:4101", "--leader-elect",
                          "--health-probe-bind-address=127.0.0.1:4103",
                          "--ansible-args='--vault-password-file /x'"]
    assert any(line.startswith("--zap-devel: not a hybrid-operator run flag") for line in notes.lines)


def test_the_entrypoint_run_arguments_are_taken_else_the_base_images(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text('FROM base\nENTRYPOINT ["/tini", "--", "/usr/local/bin/ansible-operator", "run", \\\n'
                          '  "--watches-file=./watches.yaml", "--reconcile-period=0s"]\n')
    assert cc.entrypoint_args(dockerfile) == ["--watches-file=./watches.yaml", "--reconcile-period=0s"]
    dockerfile.write_text("FROM base\nCOPY watches.yaml ${HOME}/watches.yaml\n")
    assert cc.entrypoint_args(dockerfile) == ["--watches-file=./watches.yaml"]


def test_env_from_the_pod_namespace_is_the_deployed_namespace_and_other_field_refs_are_noted() -> None:
    notes = cc.Notes()
    container = {"env": [{"name": "ANSIBLE_GATHERING", "value": "explicit"},
                         {"name": "WATCH_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                         {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}
    assert cc.translate_env(container, "osdk-test", notes) == {"ANSIBLE_GATHERING": "explicit",
                                                               "WATCH_NAMESPACE": "osdk-test"}
    assert any(line.startswith("env NODE:") and "left unset" in line for line in notes.lines)


def test_the_manager_is_the_container_the_default_container_annotation_names() -> None:
    deployment = {"kind": "Deployment", "spec": {"template": {
        "metadata": {"annotations": {"kubectl.kubernetes.io/default-container": "awx-manager"}},
        "spec": {"containers": [{"name": "kube-rbac-proxy"}, {"name": "awx-manager", "args": ["--leader-elect"]}]}}}}
    assert cc.manager_container([{"kind": "Namespace"}, deployment])["name"] == "awx-manager"
    with pytest.raises(SystemExit):
        cc.manager_container([{"kind": "Namespace"}])


def test_the_molecule_namespace_default_is_read_and_the_environment_wins(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = tmp_path / "molecule" / "default"
    scenario.mkdir(parents=True)
    (scenario / "molecule.yml").write_text("provisioner:\n  inventory:\n    group_vars:\n      all:\n"
                                           "        namespace: ${TEST_OPERATOR_NAMESPACE:-my-ns}\n")
    monkeypatch.delenv("TEST_OPERATOR_NAMESPACE", raising=False)
    assert cc.molecule_namespace(tmp_path) == "my-ns"
    monkeypatch.setenv("TEST_OPERATOR_NAMESPACE", "other")
    assert cc.molecule_namespace(tmp_path) == "other"


def test_a_curl_of_metrics_in_the_manager_pod_becomes_an_authenticated_get_with_the_same_register(
        tmp_path: Path) -> None:
    test = tmp_path / "metrics_test.yml"
    tasks = [{"name": "Get pods", "k8s_info": {"kind": "Pod"}, "register": "pods"},
             {"name": "Scrape", "kubernetes.core.k8s_exec": {"pod": "p", "command": "curl https://localhost:8443/metrics"},
              "register": "scraped"},
             {"assert": {"that": ["'up 1' in scraped.stdout"]}}]
    test.write_text(yaml.safe_dump(tasks))
    notes = cc.Notes()
    replayed = cc.replay_tasks(test, "https://127.0.0.1:4101/metrics", "TOKEN_VAR", tmp_path / "out", notes)
    assert replayed != test
    rewritten = yaml.safe_load(replayed.read_text())
    assert rewritten[0] == tasks[0] and rewritten[2] == tasks[2]
    uri, fact = rewritten[1]["block"]
    assert uri["ansible.builtin.uri"]["url"] == "https://127.0.0.1:4101/metrics"
    assert uri["ansible.builtin.uri"]["headers"] == {"Authorization": "Bearer {{ lookup('env', 'TOKEN_VAR') }}"}
    assert fact["ansible.builtin.set_fact"] == {"scraped": {"stdout": "{{ _hybrid_metrics.content }}"}}
    assert notes.lines


def test_a_test_file_without_a_metrics_exec_is_replayed_as_it_is(tmp_path: Path) -> None:
    test = tmp_path / "plain_test.yml"
    test.write_text(yaml.safe_dump([{"k8s_exec": {"pod": "p", "command": "echo hi"}, "register": "x"}]))
    assert cc.replay_tasks(test, "http://127.0.0.1:1/metrics", "T", tmp_path / "out", cc.Notes()) == test


def test_the_image_layout_copies_writes_and_notes_what_it_does_not_translate(tmp_path: Path) -> None:
    checkout, home, root = tmp_path / "checkout", tmp_path / "home", tmp_path / "root"
    (checkout / "roles" / "web" / "tasks").mkdir(parents=True)
    (checkout / "roles" / "web" / "tasks" / "main.yml").write_text("---\n[]\n")
    (checkout / "watches.yaml").write_text("---\n[]\n")
    (checkout / "ansible.cfg").write_text("[defaults]\n")
    (checkout / "Dockerfile").write_text(
        "FROM quay.io/operator-framework/ansible-operator:dev\n"
        "ARG DEFAULT_VERSION\nARG CHANNEL=stable\n"
        "ENV OPERATOR_VERSION=1.2.3\nENV DEFAULT_VERSION=${DEFAULT_VERSION}\nENV TRACK=$CHANNEL-${OPERATOR_VERSION}\n"
        "COPY watches.yaml ${HOME}/watches.yaml\n"
        "COPY roles/ ${HOME}/roles/\n"
        "COPY ansible.cfg /etc/ansible/ansible.cfg\n"
        "RUN echo abc123 > /opt/ansible/pwd.yml \\\n && dnf install -y openssl\n")
    notes = cc.Notes()
    image = cc.Image(checkout, home, root, notes)
    image.build(checkout / "Dockerfile")
    assert (home / "watches.yaml").is_file()
    assert (home / "roles" / "web" / "tasks" / "main.yml").is_file()
    assert (home / "pwd.yml").read_text() == "abc123\n"
    assert image.env == {"OPERATOR_VERSION": "1.2.3", "DEFAULT_VERSION": "", "TRACK": "stable-1.2.3",
                         "ANSIBLE_CONFIG": str(root / "etc" / "ansible" / "ansible.cfg")}
    assert any("dnf install -y openssl" in line and "not translated" in line for line in notes.lines)
    assert any(line.startswith("FROM quay.io/operator-framework/ansible-operator:dev") for line in notes.lines)


def test_molecule_yml_is_read_with_the_environment_substituted_as_molecule_does() -> None:
    env = {"SET": "v", "EMPTY": ""}
    text = "a: ${SET:-d}\nb: ${EMPTY:-d}\nc: ${EMPTY-d}\nd: ${UNSET-d}\ne: $SET/x\nf: $${SET}\ng: ${UNSET}\n"
    assert cc.molecule_interpolate(text, env) == "a: v\nb: d\nc: \nd: d\ne: v/x\nf: ${SET}\ng: \n"
