"""generate/rbac/project/manifest_yaml: CRDs from schema files, RBAC derived from automation, stable YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.authoring import generate, project, rbac
from hybrid_operator.config import manifest_yaml, watches
from hybrid_operator.errors import ConfigurationError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("kind", "plural"), [
    ("Website", "websites"), ("Realibox", "realiboxes"), ("Memcached", "memcacheds"), ("Policy", "policies"),
    ("Gateway", "gateways"), ("Status", "statuses"), ("Match", "matches"), ("Fizz", "fizzes"),
])
def test_plural(kind: str, plural: str) -> None:
    assert project.plural(kind) == plural


@pytest.mark.parametrize(("group", "version", "kind", "expected"), [
    ("cache.example.com", "v1alpha1", "Memcached", "cache_v1alpha1_memcached.yaml"),
    ("test.k8s.realibox.com", "v1", "Realibox", "test_v1_realibox.yaml"),
])
def test_sample_file_name(group: str, version: str, kind: str, expected: str) -> None:
    assert project.sample_file_name(group, version, kind) == expected


def test_dump_is_stable_block_style_with_flow_scalar_lists() -> None:
    document = {"b": {"verbs": ["get", "list"], "empty": {}, "items": [{"x": 1}]}, "a": "", "c": "16"}
    text = manifest_yaml.dump(document)
    assert text == 'b:\n  verbs: [get, list]\n  empty: {}\n  items:\n    - x: 1\na: ""\nc: \'16\'\n'
    assert manifest_yaml.dump(document) == text


def test_generated_header_is_recognized() -> None:
    text = manifest_yaml.with_header(f"{manifest_yaml.HEADER_MARK} here\nsecond line", {"a": 1})
    assert text.startswith(f"# {manifest_yaml.HEADER_MARK} here\n# second line\na: 1\n")
    assert manifest_yaml.is_generated(text)
    assert not manifest_yaml.is_generated("apiVersion: v1\n")


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_kind_without_schema_gets_an_open_schema_and_status_subresource(tmp_path: Path) -> None:
    schema = generate.load_schema(tmp_path, "Shop")
    crd = generate.crd_document(generate.ApiKind("shop.example.com", schema, ("v1", "v2")))
    assert crd["metadata"]["name"] == "shops.shop.example.com"
    assert crd["spec"]["names"] == {"plural": "shops", "singular": "shop", "kind": "Shop", "listKind": "ShopList"}
    v1, v2 = crd["spec"]["versions"]
    assert (v1["storage"], v2["storage"]) == (True, False)
    assert v1["subresources"] == {"status": {}}
    properties = v1["schema"]["openAPIV3Schema"]["properties"]
    assert properties["spec"]["x-kubernetes-preserve-unknown-fields"] is True
    assert properties["status"]["x-kubernetes-preserve-unknown-fields"] is True
    assert "additionalPrinterColumns" not in v1


def test_schema_file_gives_schema_columns_short_names_and_open_status(tmp_path: Path) -> None:
    write(tmp_path, {"schemas/shop.yaml": (
        "shortNames: [sh]\nplural: shoppen\nprinterColumns:\n  - {name: Size, type: integer, jsonPath: .spec.size}\n"
        "openAPIV3Schema:\n  type: object\n  properties:\n    spec:\n      type: object\n"
        "      properties: {size: {type: integer}}\n")})
    crd = generate.crd_document(generate.ApiKind("shop.example.com", generate.load_schema(tmp_path, "Shop"), ("v1",)))
    (version,) = crd["spec"]["versions"]
    assert crd["spec"]["names"]["shortNames"] == ["sh"]
    assert crd["metadata"]["name"] == "shoppen.shop.example.com"
    assert version["additionalPrinterColumns"] == [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]
    schema = version["schema"]["openAPIV3Schema"]
    assert schema["properties"]["spec"]["properties"] == {"size": {"type": "integer"}}
    assert schema["properties"]["status"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


@pytest.mark.parametrize(("text", "message"), [
    ("shortname: [x]\n", "unknown keys shortname"),
    ("openAPIV3Schema: {type: string}\n", "type: object"),
    ("printerColumns: [{name: X}]\n", "printerColumns must be"),
    ("scope: Global\n", "scope must be"),
    ("children: [{kind: Job}]\n", "children item needs apiVersion and kind"),
    ("- a\n", "must be a mapping"),
])
def test_bad_schema_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    write(tmp_path, {"schemas/shop.yaml": text})
    with pytest.raises(ConfigurationError, match=message):
        generate.load_schema(tmp_path, "Shop")


def resolver(api_version: str, kind: str) -> tuple[str, str] | None:
    known = {("v1", "ConfigMap"): ("", "configmaps"), ("apps/v1", "Deployment"): ("apps", "deployments"),
             ("v1", "Service"): ("", "services"), ("shop.example.com/v1", "Shop"): ("shop.example.com", "shops"),
             ("batch/v1", "Job"): ("batch", "jobs"), ("v1", "Pod"): ("", "pods")}
    return known.get((api_version, kind))


TASKS = """
- name: cm
  kubernetes.core.k8s:
    state: present
    definition: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}
- name: gone
  kubernetes.core.k8s: {state: absent, api_version: apps/v1, kind: Deployment, name: x}
- name: read
  kubernetes.core.k8s_info: {api_version: v1, kind: Service}
- name: status
  operator_sdk.util.k8s_status: {api_version: shop.example.com/v1, kind: Shop, name: x, status: {}}
"""


def test_needs_from_tasks_charts_children_and_triggers(tmp_path: Path) -> None:
    write(tmp_path, {"roles/shop/tasks/main.yml": TASKS, "charts/c/Chart.yaml": "name: c\n",
                     "charts/c/templates/svc.yaml": "apiVersion: v1\nkind: Service\n"})
    kinds = [rbac.WatchedKind("shop.example.com", "shops", "Shop", children=(("batch/v1", "Job"),),
                              related=(("v1", "Pod"),))]
    needs = {(n.group, n.resource, n.verb) for n in rbac.derive_needs(tmp_path, kinds, resolver)}
    expected = {("", "configmaps", "create"), ("", "configmaps", "patch"), ("apps", "deployments", "delete"),
                ("", "services", "list"), ("shop.example.com", "shops/status", "patch"),
                ("", "secrets", "create"), ("", "services", "delete"), ("batch", "jobs", "create"),
                ("", "pods", "watch"), ("shop.example.com", "shops/finalizers", "update")}
    assert expected <= needs
    assert ("apps", "deployments", "create") not in needs, "state: absent only deletes"
    assert ("", "pods", "create") not in needs, "trigger kinds are only read and watched"


@pytest.mark.parametrize(("tasks", "message"), [
    ("- kubernetes.core.k8s: {api_version: '{{ v }}', kind: ConfigMap, name: x}\n", "must be literal"),
    ("- kubernetes.core.k8s: {api_version: v1, kind: Unicorn, name: x}\n", "unknown kind v1 Unicorn"),
])
def test_unresolvable_kinds_are_errors_naming_the_file(tmp_path: Path, tasks: str, message: str) -> None:
    indented = "".join("    " + line for line in tasks.splitlines(True))
    write(tmp_path, {"playbooks/p.yml": f"- hosts: localhost\n  tasks:\n{indented}"})
    with pytest.raises(ConfigurationError, match=message) as raised:
        rbac.derive_needs(tmp_path, [], resolver)
    assert "playbooks/p.yml" in str(raised.value)


def test_rules_cover_every_need_with_one_rule_per_child_group() -> None:
    kinds = [rbac.WatchedKind("shop.example.com", "shops", "Shop")]
    needs = [*rbac.operator_needs(kinds), rbac.Need("", "configmaps", "create", "t"),
             rbac.Need("apps", "deployments", "get", "t"), rbac.Need("", "services", "get", "t")]
    rules = rbac.rules_for(kinds, needs)
    granted = [rule.to_dict() for rule in rules]
    assert all(rbac.allows(granted, need) for need in needs)
    children = [rule for rule in rules if rule.verbs == rbac.ALL_CHILD_VERBS and rule.resources != ("leases",)]
    assert [(r.groups, r.resources) for r in children] == [(("",), ("configmaps", "services")),
                                                           (("apps",), ("deployments",))]
    assert not rbac.allows(granted, rbac.Need("batch", "jobs", "create", "not needed"))


def test_role_text_has_comments_and_is_valid_yaml() -> None:
    import yaml

    kinds = [rbac.WatchedKind("shop.example.com", "shops", "Shop")]
    text = generate.role_text(project.ProjectConfig(name="shop-operator"), rbac.rules_for(kinds, []))
    document: dict[str, Any] = yaml.safe_load(text)
    assert document["metadata"]["name"] == "shop-operator"
    assert document["rules"][0] == {"apiGroups": ["shop.example.com"], "resources": ["shops"],
                                    "verbs": list(rbac.KIND_VERBS)}
    assert "  # Leader election.\n" in text


def test_config_files_are_named_after_the_project() -> None:
    files = generate.config_files(project.ProjectConfig(name="shop-operator"))
    assert sorted(files) == ["manager/manager.yaml", "rbac/namespace.yaml", "rbac/role_binding.yaml",
                             "rbac/service_account.yaml"]
    assert "namespace: shop-operator-system" in files["manager/manager.yaml"]
    assert "image: shop-operator:latest" in files["manager/manager.yaml"]
    assert "${" not in "".join(files.values())


def test_write_reports_changes_only_and_removes_stale_generated_crds(tmp_path: Path) -> None:
    output = tmp_path / "config"
    stale = manifest_yaml.with_header(f"{manifest_yaml.HEADER_MARK} old", {"a": 1})
    write(output, {"crd/old.yaml": stale, "crd/handwritten.yaml": "kind: X\n"})
    files = {"crd/new.yaml": "a: 1\n"}
    assert generate.write(files, output, "crd") == ["removed crd/old.yaml", "wrote crd/new.yaml"]
    assert generate.write(files, output, "crd") == []
    assert (output / "crd" / "handwritten.yaml").exists()


def test_api_kinds_group_versions_and_collect_triggers(tmp_path: Path) -> None:
    write(tmp_path, {"playbooks/p.yml": "- hosts: localhost\n  tasks: []\n", "watches.yaml": (
        "- {group: a.example.com, version: v1, kind: Shop, playbook: playbooks/p.yml,\n"
        "   triggers: [{group: '', version: v1, kind: Pod, match: {metadata.name: spec.name}}]}\n"
        "- {group: a.example.com, version: v2, kind: Shop, playbook: playbooks/p.yml}\n")})
    apis = generate.api_kinds(tmp_path, watches.load(tmp_path / "watches.yaml", {}))
    assert [(api.group, api.schema.kind, api.versions, api.related) for api in apis] == [
        ("a.example.com", "Shop", ("v1", "v2"), (("v1", "Pod"),))]
