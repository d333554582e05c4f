"""Unit tests for hybrid_operator.extravars: the SDK's snake_case rules and the extra-vars merge order."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import extravars
from hybrid_operator.config.model import AnsibleWatch, Finalizer, GroupVersionKind

pytestmark = pytest.mark.unit

# Every case of the SDK's own table (ansible-operator-plugins internal/ansible/paramconv, TestToSnake and
# TestMapToSnake), then the regressions named in compat-ansible.md and a few boundary cases.
TO_SNAKE = [
    ("var", "var"),
    ("888", "888"),
    ("k8s_var", "k8s_var"),
    ("_k8s_var", "_k8s_var"),
    ("k8s var", "k8s_var"),
    ("ThisShouldHaveUnderscores", "_this_should_have_underscores"),
    ("sizeK8sBuckets", "size_k8s_buckets"),
    ("_CanYou_Handle_mixedVars", "_can_you_handle_mixed_vars"),
    ("this_should_be_a_noop", "this_should_be_a_noop"),
    ("egressIPs", "egress_ips"),
    ("egressIPsEgress", "egress_ips_egress"),
    ("egressIPsegress", "egress_ips_egress"),
    ("IPsegress", "_ips_egress"),
    ("egressIP", "egress_ip"),
    ("egressIPEgress", "egress_ip_egress"),
    ("egressIPegress", "egress_ip_egress"),
    ("URLegressIPEgressHTTP", "url_egress_ip_egress_http"),
    ("URLsegressIPsEgressHTTPs", "_urls_egress_ips_egress_https"),
    ("THIS_IS_SKIP_NOT_SK_IP", "_this_is_skip_not_sk_ip"),
    ("var_var", "var_var"),
    ("size_k8s_test", "size_k8s_test"),
    # regressions of older SDK releases (#3173, #2604, #1366, #5887)
    ("db2_init", "db2_init"),
    ("pg1_repo_path", "pg1_repo_path"),
    ("quotaName", "quota_name"),
    # boundaries
    ("appService", "app_service"),
    ("JSONData", "_json_data"),
    ("HTTPServer", "http_server"),
    ("kebab-case-key", "kebab_case_key"),
    (" padded ", "padded"),
    ("a1b2", "a_1_b2"),
    ("", ""),
]


@pytest.mark.parametrize(("name", "expected"), TO_SNAKE, ids=[case[0] or "<empty>" for case in TO_SNAKE])
def test_to_snake(name: str, expected: str) -> None:
    assert extravars.to_snake(name) == expected


def test_snake_keys_recurses_into_maps_and_lists_and_keeps_values() -> None:
    spec = {
        "egressIPs": ["10.0.0.1", {"innerKey": "camelValue"}],
        "podSpec": {"nodeSelector": {"kubernetes.io/hostName": "n1"}, "replicaCount": 3},
        "plain": None,
    }
    assert extravars.snake_keys(spec) == {
        "egress_ips": ["10.0.0.1", {"inner_key": "camelValue"}],
        "pod_spec": {"node_selector": {"kubernetes.io/host_name": "n1"}, "replica_count": 3},
        "plain": None,
    }


@pytest.mark.parametrize(
    ("group", "kind", "key"),
    [
        ("cache.example.com", "Memcached", "_cache_example_com_memcached"),
        ("", "Secret", "__secret"),
        ("cert-manager.io", "Certificate", "_cert_manager_io_certificate"),
    ],
)
def test_object_key(group: str, kind: str, key: str) -> None:
    assert extravars.object_key(GroupVersionKind(group, "v1", kind)) == key


GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")
CR: dict[str, Any] = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "metadata": {"name": "demo", "namespace": "apps", "labels": {"app": "demo"}},
    "spec": {"replicaCount": 2, "imageTag": "1.6", "enabled": True, "ports": [{"containerPort": 11211}],
             "ansible_operator_meta": "from spec", "overridden": "spec value"},
    "status": {"conditions": []},
}


def watch(**changes: Any) -> AnsibleWatch:
    return dataclasses.replace(AnsibleWatch(gvk=GVK, playbook=Path("/pb.yml"), mark_unsafe=False), **changes)


def test_merge_order_without_unsafe() -> None:
    result = extravars.build_extra_vars(CR, watch(vars={"overridden": "watch value", "extra": "{{ x }}"}),
                                        finalizer=False)
    assert result == {
        "replica_count": 2,
        "image_tag": "1.6",
        "enabled": True,
        "ports": [{"container_port": 11211}],
        "ansible_operator_meta": {"name": "demo", "namespace": "apps"},  # overrides the spec key
        "overridden": "watch value",  # watch vars override the spec
        "extra": "{{ x }}",
        "_cache_example_com_memcached": CR,
        "_cache_example_com_memcached_spec": CR["spec"],
    }
    assert list(result)[:5] == ["replica_count", "image_tag", "enabled", "ports", "ansible_operator_meta"]


def test_raw_keys_when_snake_case_is_off() -> None:
    result = extravars.build_extra_vars(CR, watch(snake_case_parameters=False), finalizer=False)
    assert result["replicaCount"] == 2 and result["ports"] == [{"containerPort": 11211}]
    assert "replica_count" not in result


@pytest.mark.parametrize("run_finalizer", [True, False])
def test_finalizer_vars_only_on_finalizer_runs(run_finalizer: bool) -> None:
    finalizer = Finalizer(name="cache.example.com/finalizer", vars={"state": "absent", "overridden": "final"})
    configured = watch(vars={"state": "present", "overridden": "watch"}, finalizer=finalizer)
    result = extravars.build_extra_vars(CR, configured, finalizer=run_finalizer)
    expected = ("absent", "final") if run_finalizer else ("present", "watch")
    assert (result["state"], result["overridden"]) == expected


def test_finalizer_run_without_finalizer_is_a_bug() -> None:
    with pytest.raises(ValueError, match="has no finalizer"):
        extravars.build_extra_vars(CR, watch(), finalizer=True)


@pytest.mark.parametrize("spec", [None, "a string", ["a", "list"]])
def test_missing_or_odd_spec_counts_as_empty(spec: Any) -> None:
    cr = {"metadata": {"name": "x"}, **({} if spec is None else {"spec": spec})}
    result = extravars.build_extra_vars(cr, watch(), finalizer=False)
    assert result == {
        "ansible_operator_meta": {"name": "x", "namespace": ""},
        "_cache_example_com_memcached": cr,
        "_cache_example_com_memcached_spec": {},
    }


def test_mark_unsafe_wraps_every_cr_value_whole() -> None:
    configured = watch(mark_unsafe=True, vars={"tpl": "{{ meta }}"})
    result = extravars.build_extra_vars(CR, configured, finalizer=False)
    unsafe = extravars.UNSAFE_KEY
    assert result["image_tag"] == {unsafe: "1.6"}
    assert result["replica_count"] == 2 and result["enabled"] is True  # nothing to template in them
    # maps and lists whole: ansible-core's wrap_var then marks their keys as well as their strings
    assert result["ports"] == {unsafe: [{"container_port": 11211}]}
    whole = result["_cache_example_com_memcached"]
    assert whole == {unsafe: CR}
    assert result["_cache_example_com_memcached_spec"] == {unsafe: CR["spec"]}
    assert result["ansible_operator_meta"] == {"name": "demo", "namespace": "apps"}  # Kubernetes names
    assert result["tpl"] == "{{ meta }}"  # the operator author's vars stay templatable
    json.dumps(result)  # the runner writes it as JSON


def test_mark_unsafe_helper() -> None:
    assert extravars.mark_unsafe({"a": ("x", 1, {"b": None}), "c": 1.5}) == {
        "__ansible_unsafe": {"a": ["x", 1, {"b": None}], "c": 1.5}}
    assert extravars.mark_unsafe("{{ x }}") == {"__ansible_unsafe": "{{ x }}"}
    assert extravars.mark_unsafe(3) == 3 and extravars.mark_unsafe(None) is None


def test_run_documents_put_the_spec_variables_first_wrapped_whole() -> None:
    configured = watch(mark_unsafe=True, vars={"overridden": "watch value", "tpl": "{{ meta }}"})
    run = extravars.extra_vars_documents(CR, configured, finalizer=False, extra={"_related": {"Pod": []}})
    first, second = run.documents
    unsafe = extravars.UNSAFE_KEY
    # the spec's names are unsafe too; what a later document sets (the watch's vars) is left to it
    assert first == {unsafe: {"replica_count": 2, "image_tag": "1.6", "enabled": True,
                              "ports": [{"container_port": 11211}]}}
    assert second["overridden"] == "watch value" and second["tpl"] == "{{ meta }}"
    assert second["_related"] == {"Pod": []}
    assert second["ansible_operator_meta"] == {"name": "demo", "namespace": "apps"}
    # Ansible's own names from the spec are never written, whoever checked the spec before
    assert run.dropped == ("ansible_operator_meta",)
    merged = {**first[unsafe], **second}
    expected = {**extravars.build_extra_vars(CR, configured, finalizer=False), "_related": {"Pod": []}}
    for name in ("replica_count", "image_tag", "enabled", "ports"):
        expected[name] = first[unsafe][name]
    assert merged == expected


def test_run_documents_without_mark_unsafe_are_one_merged_map() -> None:
    run = extravars.extra_vars_documents({**CR, "spec": {"ansibleBecomeExe": "x", "size": 1}}, watch(),
                                         finalizer=False)
    assert len(run.documents) == 1 and run.documents[0]["size"] == 1
    assert "ansible_become_exe" not in run.documents[0] and run.dropped == ("ansible_become_exe",)


def test_result_shares_nothing_with_inputs() -> None:
    cr = copy.deepcopy(CR)
    w = watch(vars={"nested": {"k": "v"}})
    result = extravars.build_extra_vars(cr, w, finalizer=False)
    result["_cache_example_com_memcached"]["metadata"]["name"] = "changed"
    result["_cache_example_com_memcached_spec"]["imageTag"] = "changed"
    result["nested"]["k"] = "changed"
    assert cr == CR
    assert w.vars == {"nested": {"k": "v"}}


# -- refusals: what a spec may not set (docs/security.md) --------------------------------------------

REFUSED = [
    ({"ansible_connection": "ssh"}, "ansible_connection"),
    ({"ansibleConnection": "ssh"}, "ansible_connection"),  # after snake_case
    ({"ansibleBecomeExe": "x"}, "ansible_become_exe"),
    ({"ansible_python_interpreter": "/bin/false"}, "ansible_python_interpreter"),
    ({"ansibleSshCommonArgs": "-o ProxyCommand=x"}, "ansible_ssh_common_args"),
    ({"ansible_operator_meta": {"name": "other"}}, "ansible_operator_meta"),
    ({"hostvars": {}}, "hostvars"),
    ({"groups": ["all"]}, "groups"),
    ({"inventoryHostname": "h"}, "inventory_hostname"),
    ({"playbookDir": "/tmp"}, "playbook_dir"),
    ({"rolePath": "/tmp"}, "role_path"),
    ({"omit": "x"}, "omit"),
    ({"_cache_example_com_memcached": {}}, "_cache_example_com_memcached"),
    ({"_cache_example_com_memcached_spec": {}}, "_cache_example_com_memcached_spec"),
    ({"Related": []}, "_related"),
]


@pytest.mark.parametrize(("spec", "name"), REFUSED, ids=[next(iter(case[0])) for case in REFUSED])
def test_spec_keys_that_would_set_reserved_variables_are_refused(spec: dict[str, Any], name: str) -> None:
    problems = extravars.refusals({"spec": spec}, watch())
    assert len(problems) == 1
    assert f"spec.{next(iter(spec))}:" in problems[0] and f'"{name}"' in problems[0]


# Playbook keywords and Jinja globals (ansible-core's get_reserved_names()) steer nothing as variables,
# and real SDK operators use them as spec keys.
ALLOWED = ["name", "namespace", "port", "action", "args", "tags", "environment", "timeout", "vars", "connection",
           "become", "hosts", "state", "size", "image", "range", "lookup", "replicas", "ansible", "my_ansible_x",
           "Ansible_connection", "_ansible_connection", "ANSIBLE_CONNECTION"]


@pytest.mark.parametrize("key", ALLOWED)
def test_keywords_and_ordinary_keys_are_not_refused(key: str) -> None:
    assert extravars.refusals({"spec": {key: "x"}}, watch()) == []


def test_raw_key_is_checked_when_snake_case_is_off() -> None:
    assert extravars.refusals({"spec": {"ansibleConnection": "ssh"}}, watch(snake_case_parameters=False)) == []
    problems = extravars.refusals({"spec": {"ansible_connection": "ssh"}}, watch(snake_case_parameters=False))
    assert len(problems) == 1 and "ansible_connection" in problems[0]


def test_snake_case_collisions_name_both_keys_at_any_depth() -> None:
    spec = {"fooBar": 1, "foo_bar": 2, "nested": {"aBc": 1, "a_bc": 2, "list": [{"xYz": 1, "x_yz": 2}]}}
    problems = extravars.refusals({"spec": spec}, watch())
    assert problems == [
        'spec.fooBar and spec.foo_bar both become "foo_bar" after snake_case conversion; keep only one of them',
        'spec.nested.aBc and spec.nested.a_bc both become "a_bc" after snake_case conversion; keep only one of them',
        'spec.nested.list[0].xYz and spec.nested.list[0].x_yz both become "x_yz" after snake_case conversion; '
        "keep only one of them",
    ]
    assert extravars.refusals({"spec": spec}, watch(snake_case_parameters=False)) == []


def test_ordinary_specs_are_not_refused() -> None:
    spec = {key: value for key, value in CR["spec"].items() if key != "ansible_operator_meta"}
    assert extravars.refusals({**CR, "spec": spec}, watch()) == []
    assert extravars.refusals({"spec": None}, watch()) == []


def test_keys_holding_a_brace_are_refused_at_any_depth() -> None:
    evil = "{{ lookup('pipe', 'id') }}"
    spec = {"features": {evil: True, "ok": 1}, "list": [{"a": {"x{": 1}}], "{": 1}
    problems = extravars.refusals({"spec": spec}, watch(mark_unsafe=True))
    assert len(problems) == 3, problems
    assert problems[0].startswith('spec["{"]: a key may not contain')
    assert problems[1].startswith('spec.features["{{ lookup(\'pipe\', \'id\') }}"]: a key may not contain')
    assert problems[2].startswith('spec.list[0].a["x{"]: a key may not contain')
    long_key = "{" + "x" * 500
    (problem,) = extravars.refusals({"spec": {"m": {long_key: 1}}}, watch())
    assert len(problem) < 300 and "..." in problem


def test_keys_the_extra_vars_loader_interprets_are_refused() -> None:
    spec = {"a": {"__ansible_vault": "$ANSIBLE_VAULT;1.1;AES256"}, "b": [{"__ansible_unsafe": "x"}]}
    problems = extravars.refusals({"spec": spec}, watch())
    assert [problem.split(":")[0] for problem in problems] == ["spec.a.__ansible_vault", "spec.b[0].__ansible_unsafe"]


def test_variables_the_automation_sets_are_refused_naming_the_key_and_where() -> None:
    own = {"db_namespace": "set_fact at roles/database/tasks/main.yml:11", "found": "task vars at x.yml:3"}
    spec = {"dbNamespace": "victim", "engine": "postgres", "found": 1}
    problems = extravars.refusals({"spec": spec}, watch(), own)
    assert problems == [
        'spec.dbNamespace: becomes the variable "db_namespace", which the automation sets itself (set_fact at '
        "roles/database/tasks/main.yml:11); a custom resource may not override it (a spec key would outrank it). "
        "Only a role's defaults/ may be set from the spec",
        'spec.found: is the variable "found", which the automation sets itself (task vars at x.yml:3); a custom '
        "resource may not override it (a spec key would outrank it). Only a role's defaults/ may be set from the spec",
    ]
    assert extravars.refusals({"spec": {"engine": "x"}}, watch(), own) == []


def test_related_objects_with_jinja_keys_are_left_out() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "ok", "namespace": "ns",
                                       "managedFields": [{"fieldsV1": {'k:{"name":"c"}': {}}}]}}
    evil = {"kind": "Pod", "metadata": {"name": "evil", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {"nodeSelector": {"{{ lookup('pipe', 'id') }}": "x"}}}
    vault = {"kind": "ConfigMap", "metadata": {"name": "v"}, "data": {"__ansible_vault": "x"}}
    kept, left_out = extravars.related_without_unsafe_keys({"Pod": [pod, evil], "ConfigMap": [vault]})
    assert kept == {"Pod": [pod], "ConfigMap": []}  # managedFields' k:{...} keys are the API server's
    assert left_out[0].startswith('Pod ns/evil.spec.nodeSelector["{{ lookup(\'pipe\', \'id\') }}"]: a key may not')
    assert left_out[1].startswith("ConfigMap v.data.__ansible_vault: a key Ansible's extra vars loader interprets")
