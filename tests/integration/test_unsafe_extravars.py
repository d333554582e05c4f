"""Integration test: ansible-core really treats markUnsafe-wrapped extra vars as literal text.

build_extra_vars wraps CR strings as {"__ansible_unsafe": ...}; this runs the real ansible-playbook
with ``-e @extravars.json`` (as ansible-runner does) on a localhost playbook and checks that Jinja
typed into a CR -- a ``lookup('pipe', 'id')`` -- comes out as the literal string, while the same
file without the wrapping does execute it (so the test can tell the difference).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.extravars import build_extra_vars
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind

pytestmark = pytest.mark.integration

INJECTION = "{{ lookup('pipe', 'id') }}"
PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: write what Ansible made of the variables
      ansible.builtin.copy:
        dest: "{{ result_file }}"
        content: "{{ seen | to_json }}"
      vars:
        seen:
          top: "{{ evil_value }}"
          nested: "{{ items[0].command }}"
          whole: "{{ _cache_example_com_memcached.spec.evilValue }}"
          raw_spec: "{{ _cache_example_com_memcached_spec.evilValue }}"
          name: "{{ ansible_operator_meta.name }}"
          author: "{{ author_template }}"
"""


def run_playbook(tmp_path: Path, *, mark_unsafe: bool) -> dict[str, Any]:
    cr = {
        "apiVersion": "cache.example.com/v1", "kind": "Memcached",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {"evilValue": INJECTION, "items": [{"command": INJECTION}]},
    }
    result_file = tmp_path / "result.json"
    watch = AnsibleWatch(
        gvk=GroupVersionKind("cache.example.com", "v1", "Memcached"), playbook=tmp_path / "site.yml",
        mark_unsafe=mark_unsafe, vars={"result_file": str(result_file), "author_template": "{{ 20 + 22 }}"},
    )
    extra_vars = build_extra_vars(cr, watch, finalizer=False)
    (tmp_path / "extravars.json").write_text(json.dumps(extra_vars))
    (tmp_path / "site.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    env = {
        "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_NOCOLOR": "1", "ANSIBLE_DEPRECATION_WARNINGS": "0", "ANSIBLE_RETRY_FILES_ENABLED": "0",
    }
    ansible_playbook = Path(sys.executable).parent / "ansible-playbook"
    completed = subprocess.run(
        [str(ansible_playbook), "-i", "hosts", "-e", "@extravars.json", "site.yml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    result: dict[str, Any] = json.loads(result_file.read_text())
    return result


def test_unsafe_cr_strings_stay_literal(tmp_path: Path) -> None:
    result = run_playbook(tmp_path, mark_unsafe=True)
    assert result["top"] == INJECTION
    assert result["nested"] == INJECTION
    assert result["whole"] == INJECTION
    assert result["raw_spec"] == INJECTION
    assert result["name"] == "demo"
    assert result["author"] == "42"  # the operator author's own vars are still templated


def test_without_mark_unsafe_the_lookup_runs(tmp_path: Path) -> None:
    result = run_playbook(tmp_path, mark_unsafe=False)
    assert result["top"].startswith("uid="), result
    assert result["whole"].startswith("uid="), result
