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


def test_mark_unsafe_wraps_every_cr_string() -> None:
    configured = watch(mark_unsafe=True, vars={"tpl": "{{ meta }}"})
    result = extravars.build_extra_vars(CR, configured, finalizer=False)
    unsafe = extravars.UNSAFE_KEY
    assert result["image_tag"] == {unsafe: "1.6"}
    assert result["replica_count"] == 2 and result["enabled"] is True  # only strings are wrapped
    assert result["ports"] == [{"container_port": 11211}]
    whole = result["_cache_example_com_memcached"]
    assert whole["kind"] == {unsafe: "Memcached"}
    assert whole["metadata"]["labels"] == {"app": {unsafe: "demo"}}
    assert result["_cache_example_com_memcached_spec"]["imageTag"] == {unsafe: "1.6"}
    assert result["ansible_operator_meta"] == {"name": "demo", "namespace": "apps"}  # Kubernetes names
    assert result["tpl"] == "{{ meta }}"  # the operator author's vars stay templatable
    json.dumps(result)  # the runner writes it as JSON


def test_mark_unsafe_helper() -> None:
    assert extravars.mark_unsafe({"a": ["x", 1, {"b": None}], "c": 1.5}) == {
        "a": [{"__ansible_unsafe": "x"}, 1, {"b": None}], "c": 1.5}


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
