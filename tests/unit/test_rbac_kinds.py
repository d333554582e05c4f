"""``generate rbac`` reads kinds as Kubernetes would (issue 14, gap 11).

A chart rendering ``kind: List`` needs its items' resources, not a ``lists`` rule; a misspelled kind
in a role (``configmapps``) is a warning naming the file and line; resource and singular names
(``configmaps``, ``configmap``), which ``kubernetes.core`` accepts, resolve to the right resource.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hybrid_operator.authoring import generate, kinds, rbac

pytestmark = pytest.mark.unit

LIST_TEMPLATE = """apiVersion: v1
kind: List
items:
{{- range .Values.names }}
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: {{ . }}
      ownerReferences:
        - apiVersion: apps/v1
          kind: Deployment
          name: x
{{- end }}
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    roleRef:
      apiGroup: rbac.authorization.k8s.io
      kind: Role
      name: r
    subjects:
      - kind: ServiceAccount
        name: s
---
apiVersion: v1
kind: Service
metadata: {name: plain}
"""


def test_list_items_are_expanded_not_a_lists_rule() -> None:
    assert rbac.template_kinds(LIST_TEMPLATE) == [
        ("v1", "ConfigMap"), ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("v1", "Service")]


def test_a_chart_rendering_a_list_gets_rules_for_its_items(tmp_path: Path) -> None:
    (tmp_path / "charts" / "c" / "templates").mkdir(parents=True)
    (tmp_path / "charts" / "c" / "Chart.yaml").write_text("name: c\n")
    (tmp_path / "charts" / "c" / "templates" / "list.yaml").write_text(LIST_TEMPLATE)
    needs = {(n.group, n.resource) for n in rbac.derive_needs(tmp_path, [], resolve)}
    assert ("", "configmaps") in needs and ("rbac.authorization.k8s.io", "rolebindings") in needs
    assert not any(resource == "lists" for _, resource in needs)
    assert ("apps", "deployments") not in needs and ("", "serviceaccounts") not in needs  # nested kinds


def resolve(api_version: str, kind: str) -> tuple[str, str] | None:
    group = api_version.rpartition("/")[0]
    return group, kinds.lookup(group, kind).plural or generate.plural_of(kind)


TYPO_TASKS = """- name: cm
  kubernetes.core.k8s:
    state: present
    api_version: v1
    kind: configmapps
    name: settings
- name: by resource name
  kubernetes.core.k8s_info:
    api_version: v1
    kind: configmaps
"""


def test_a_misspelled_kind_is_a_warning_naming_file_and_line(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    tasks = tmp_path / "roles" / "web" / "tasks" / "main.yml"
    tasks.parent.mkdir(parents=True)
    tasks.write_text(TYPO_TASKS)
    with caplog.at_level(logging.WARNING):
        needs = rbac.derive_needs(tmp_path, [], resolve)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("roles/web/tasks/main.yml:5: kind 'configmapps' is not a kind of v1")
    assert "did you mean ConfigMap?" in warning
    assert ("", "configmaps", "list") in {(n.group, n.resource, n.verb) for n in needs}  # the resource name is fine


@pytest.mark.parametrize(("group", "name", "plural"), [
    ("", "ConfigMap", "configmaps"), ("", "configmaps", "configmaps"), ("", "configmap", "configmaps"),
    ("apps", "Deployment", "deployments"), ("networking.k8s.io", "NetworkPolicy", "networkpolicies"),
    ("", "Endpoints", "endpoints"),
])
def test_builtin_names(group: str, name: str, plural: str) -> None:
    assert kinds.lookup(group, name).plural == plural


def test_custom_groups_are_not_judged() -> None:
    found = kinds.lookup("monitoring.coreos.com", "ServiceMonitor")
    assert (found.plural, found.builtin_group) == (None, False)
