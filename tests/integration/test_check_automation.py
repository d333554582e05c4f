"""``hybrid-operator check`` resolves what the watches file references as a run would (issue 14, gap 13).

A role whose YAML does not parse and a playbook importing a role no run can find used to pass
``check``; each is now a problem with file and line, and exit code 2. What a run finds -- the
project's ``roles/`` for a play-level ``roles:`` (awx-operator), ``--ansible-roles-path``, a role's
meta dependencies, a collection role -- passes. No network, no cluster, no Ansible process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

WATCHES = """- version: v1
  group: example.com
  kind: App
  playbook: playbooks/app.yml
- version: v1
  group: example.com
  kind: Db
  role: db
"""
PLAYBOOK = """- hosts: localhost
  gather_facts: no
  roles:
    - installer
  tasks:
    - name: more
      ansible.builtin.import_tasks: extra.yml
"""


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def project(root: Path, **overrides: str) -> Path:
    files = {
        "watches.yaml": WATCHES,
        "playbooks/app.yml": PLAYBOOK,
        "playbooks/extra.yml": "- ansible.builtin.debug: {msg: extra}\n",
        "roles/installer/meta/main.yml": "dependencies:\n  - role: common\n",
        "roles/installer/tasks/main.yml": "- ansible.builtin.include_role:\n    name: '{{ dynamic }}'\n",
        "roles/common/tasks/main.yml": "- ansible.builtin.debug: {msg: common}\n",
        "roles/db/tasks/main.yml": "- name: x\n  ansible.builtin.import_role:\n    name: common\n",
        "roles/db/defaults/main.yml": "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3130\n",
    }
    files.update(overrides)
    write(root, files)
    return root / "watches.yaml"


def check(watches: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hybrid_operator.cli", "check", "--watches-file", str(watches),
                           *args], capture_output=True, text=True, timeout=120, check=False,
                          cwd=cwd or watches.parent, env={"HOME": str(watches.parent / "home"), "PATH": "/usr/bin",
                                                          **MEASUREMENT_ENV})


#: coverage's variables (under `make coverage`), so the isolated `check` process is measured too
MEASUREMENT_ENV = {key: value for key, value in os.environ.items() if key.startswith(("COVERAGE_", "COV_CORE_"))}


def test_what_a_run_finds_passes(tmp_path: Path) -> None:
    done = check(project(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "2 valid entries" in done.stdout


def test_a_role_whose_yaml_does_not_parse_is_a_problem_with_file_and_line(tmp_path: Path) -> None:
    watches = project(tmp_path, **{"roles/common/tasks/main.yml": "- name: broken\n  debug: {msg: [unclosed\n"})
    done = check(watches)
    assert done.returncode == 2
    assert f"{tmp_path / 'roles/common/tasks/main.yml'}:3: invalid YAML" in done.stderr


def test_a_playbook_importing_a_missing_role_is_a_problem_with_file_and_line(tmp_path: Path) -> None:
    watches = project(tmp_path, **{"playbooks/app.yml": PLAYBOOK.replace("installer", "instaler")})
    done = check(watches)
    assert done.returncode == 2
    assert f"{tmp_path / 'playbooks/app.yml'}:4: role 'instaler' was not found; looked in: " in done.stderr
    assert str(tmp_path / "roles" / "instaler") in done.stderr


def test_missing_dependencies_and_task_files_are_problems(tmp_path: Path) -> None:
    watches = project(tmp_path, **{"roles/installer/meta/main.yml": "dependencies:\n  - role: comon\n",
                                   "playbooks/app.yml": PLAYBOOK.replace("extra.yml", "missing.yml")})
    done = check(watches)
    assert done.returncode == 2
    assert f"{tmp_path / 'roles/installer/meta/main.yml'}:2: role 'comon' was not found" in done.stderr
    assert f"{tmp_path / 'playbooks/app.yml'}:6: 'missing.yml': no such task file" in done.stderr


def test_the_ansible_roles_path_flag_is_searched(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    watches = project(tmp_path / "p")
    (tmp_path / "p" / "roles" / "common").rename(shared / "common")
    assert check(watches).returncode == 2
    done = check(watches, "--ansible-roles-path", str(shared))
    assert done.returncode == 0, done.stderr


def test_a_role_in_the_working_directory_is_found(tmp_path: Path) -> None:
    """The SDK's {{CWD}}/roles: the operator (and check) started elsewhere than the watches file."""
    watches = project(tmp_path / "p")
    cwd = tmp_path / "image"
    (cwd / "roles").mkdir(parents=True)
    (tmp_path / "p" / "roles" / "common").rename(cwd / "roles" / "common")
    assert check(watches, cwd=cwd).returncode == 0


def test_a_collection_role_is_resolved_on_the_collections_path(tmp_path: Path) -> None:
    watches = project(tmp_path, **{
        "playbooks/app.yml": "- hosts: localhost\n  roles:\n    - ns.coll.tool\n",
        "collections/ansible_collections/ns/coll/roles/tool/tasks/main.yml": "- ansible.builtin.debug: {}\n"})
    assert check(watches).returncode == 2
    done = check(watches, "--ansible-collections-path", str(tmp_path / "collections"))
    assert done.returncode == 0, done.stderr


def test_an_alias_bomb_in_a_role_is_refused_not_expanded(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8))
    watches = project(tmp_path, **{"roles/db/vars/main.yml": bomb})
    done = check(watches)
    assert done.returncode == 2
    assert f"{tmp_path / 'roles/db/vars/main.yml'}:1: YAML aliases expand this file" in done.stderr
