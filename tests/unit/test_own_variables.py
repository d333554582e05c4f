"""Unit tests for hybrid_operator.config.automation.own_variables: what the automation sets itself.

A spec key that becomes one of these variables is refused (docs/security.md); a role's defaults,
its argument specs, ``vars_prompt`` and a ``set_fact`` that defaults the variable it sets are inputs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hybrid_operator.config import automation
from hybrid_operator.config.model import AnsibleWatch, Finalizer, GroupVersionKind

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("example.com", "v1", "App")
ENV = {"ANSIBLE_ROLES_PATH": "", "ANSIBLE_COLLECTIONS_PATH": "/nonexistent"}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


PLAYBOOK = """\
- import_playbook: other.yml
  vars:
    imported_var: 1
- hosts: localhost
  vars:
    play_var: 1
  vars_files:
    - vars/common.yml
    - ["vars/missing.yml", "vars/fallback.yml"]
    - "{{ templated }}.yml"
  vars_prompt:
    - name: prompted
  roles:
    - role: helper
      vars:
        entry_var: 1
      helper_param: 2
      tags: [x]
      when: true
  pre_tasks:
    - ansible.builtin.set_fact:
        pre_fact: 1
  tasks:
    - name: block
      vars:
        block_var: 1
      block:
        - name: inner
          ansible.legacy.set_fact:
            inner_fact: "{{ play_var }}"
            cacheable: true
          register: inner_result
      rescue:
        - set_fact: rescue_fact=1 other_fact="{{ x }}"
    - name: task vars
      ansible.builtin.debug:
        msg: hi
      vars:
        task_var: 1
    - name: defaulting
      ansible.builtin.set_fact:
        replicas: "{{ replicas | default(1) }}"
    - name: templated name
      ansible.builtin.set_fact:
        "{{ dynamic }}": 1
    - ansible.builtin.include_vars: vars/extra.yml
    - ansible.builtin.include_vars:
        file: vars/named.yml
        name: loaded_as
    - ansible.builtin.include_tasks: more.yml
  post_tasks:
    - ansible.builtin.debug: {msg: x}
      register: post_result
  handlers:
    - name: h
      ansible.builtin.set_fact:
        handler_fact: 1
"""


def project(root: Path) -> AnsibleWatch:
    write(root, {
        "site.yml": PLAYBOOK,
        "other.yml": "- hosts: localhost\n  tasks:\n    - ansible.builtin.set_fact: {other_fact2: 1}\n",
        "more.yml": "- ansible.builtin.command: id\n  register: more_result\n",
        "vars/common.yml": "common_a: 1\ncommon_b: 2\n",
        "vars/fallback.yml": "fallback_a: 1\n",
        "vars/extra.yml": "extra_a: 1\n",
        "vars/named.yml": "ignored: 1\n",
        "roles/helper/tasks/main.yml": "- ansible.builtin.set_fact: {helper_fact: 1}\n",
        "roles/helper/vars/main.yml": "helper_var: 1\n",
        "roles/helper/vars/postgres.yml": "engine_port: 5432\n",
        "roles/helper/defaults/main.yml": "helper_default: 1\nhelper_fact: 0\n",
        "roles/helper/meta/argument_specs.yml":
            "argument_specs:\n  main:\n    options:\n      helper_option: {type: str}\n",
        "roles/helper/meta/main.yml": "dependencies:\n  - role: dep\n    dep_param: 1\n",
        "roles/dep/vars/main.yml": "dep_var: 1\n",
    })
    return AnsibleWatch(gvk=GVK, playbook=root / "site.yml")


def test_every_way_a_playbook_and_its_roles_set_variables(tmp_path: Path) -> None:
    found = automation.own_variables(project(tmp_path), tmp_path, ENV)
    assert sorted(found) == sorted([
        "imported_var", "play_var", "common_a", "common_b", "fallback_a", "entry_var", "helper_param", "pre_fact",
        "block_var", "inner_fact", "inner_result", "rescue_fact", "other_fact", "task_var", "extra_a", "loaded_as",
        "more_result", "post_result", "handler_fact", "other_fact2", "helper_var", "engine_port", "dep_param",
        "dep_var",
    ])
    # inputs: prompts, a defaulting set_fact, role defaults (even if a task sets one too), argument specs
    for name in ("prompted", "replicas", "helper_default", "helper_fact", "helper_option", "cacheable", "tags"):
        assert name not in found
    assert found["inner_fact"] == "set_fact at site.yml:28"
    assert found["helper_var"] == "role vars in roles/helper/vars/main.yml"
    assert found["common_a"] == "vars_files vars/common.yml loaded at site.yml:4"


def test_a_role_watch_and_its_finalizer_playbook(tmp_path: Path) -> None:
    write(tmp_path, {
        "roles/db/tasks/main.yml": "- ansible.builtin.set_fact: {db_namespace: x}\n",
        "roles/db/defaults/main.yml": "state: present\n",
        "finalizer.yml": "- hosts: localhost\n  tasks:\n    - ansible.builtin.debug: {msg: x}\n      register: gone\n",
    })
    watch = AnsibleWatch(gvk=GVK, role=tmp_path / "roles" / "db",
                         finalizer=Finalizer("example.com/f", playbook=tmp_path / "finalizer.yml"))
    assert automation.own_variables(watch, tmp_path, ENV) == {
        "db_namespace": "set_fact at roles/db/tasks/main.yml:1", "gone": "register at finalizer.yml:3"}


def test_the_shipped_database_role_protects_its_names() -> None:
    root = Path(__file__).resolve().parents[2]
    watch = AnsibleWatch(gvk=GVK, role=root / "roles" / "database")
    found = automation.own_variables(watch, root, ENV)
    assert {"db_namespace", "db_image", "db_name", "db_labels", "db_port", "db_statefulset", "db_ready"} <= set(found)
    assert not {"state", "replicas", "storage", "engine", "version", "not_ready_requeue"} & set(found)


def test_own_variables_are_read_again_when_a_file_changes(tmp_path: Path) -> None:
    write(tmp_path, {"roles/r/tasks/main.yml": "- ansible.builtin.set_fact: {first: 1}\n"})
    watched = automation.OwnVariables(AnsibleWatch(gvk=GVK, role=tmp_path / "roles" / "r"), tmp_path, ENV)
    assert list(watched.current()) == ["first"]
    assert list(watched.current()) == ["first"] and watched.walks == 1  # nothing changed: not walked again
    tasks = tmp_path / "roles" / "r" / "tasks" / "main.yml"
    tasks.write_text("- ansible.builtin.set_fact: {first: 1, second: 2}\n")
    later = time.time() + 2
    os.utime(tasks, (later, later))
    assert list(watched.current()) == ["first", "second"]
    write(tmp_path, {"roles/r/vars/main.yml": "third: 3\n"})  # a new directory and file in the role
    assert list(watched.current()) == ["first", "second", "third"]
    assert watched.walks == 3


def test_spec_overrides_are_left_to_the_spec(tmp_path: Path) -> None:
    tasks = ("- ansible.builtin.set_fact: {first: 1, second: 2}\n"
             "- ansible.builtin.set_fact: {third: 3}\n  when: third is not defined\n")
    entry = "- {group: example.com, version: v1, kind: App, role: r, specOverrides: [second]}\n"
    write(tmp_path, {"roles/r/tasks/main.yml": tasks, "watches.yaml": entry})
    from hybrid_operator.config import watches

    (watch,) = watches.load(tmp_path / "watches.yaml", ENV)
    assert isinstance(watch, AnsibleWatch) and watch.spec_overrides == ("second",)
    assert list(automation.own_variables(watch, tmp_path, ENV)) == ["first"]  # third: a default written as a task


def test_spec_overrides_must_be_variable_names(tmp_path: Path) -> None:
    from hybrid_operator import errors
    from hybrid_operator.config import watches

    write(tmp_path, {"roles/r/tasks/main.yml": "[]\n",
                     "watches.yaml": "- {group: example.com, version: v1, kind: App, role: r, specOverrides: [a-b]}\n"})
    with pytest.raises(errors.ConfigurationError, match='key "specOverrides": must be a list of variable names'):
        watches.load(tmp_path / "watches.yaml", ENV)
