"""What every run gets from the operator, as the Operator SDK gives it (issue 14, gaps 1, 2 and 4).

Real ansible-runner runs on localhost (no cluster): a playbook's play-level ``roles:`` finds the
project's ``roles/`` (awx-operator's ``playbooks/awx.yml`` with ``roles: [installer]``), the
``--ansible-roles-path`` flag and ``ANSIBLE_INVENTORY`` are honoured, a play that matched no host
is reported, and ``--ansible-args`` as Kubernetes delivers it (with its quotes) decrypts vault vars.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.environment import ansible_env
from hybrid_operator.ansible.runner import AnsibleRunner
from hybrid_operator.ansible.runs import RunRequest
from hybrid_operator.cli.commands import _environ, build_parser
from hybrid_operator.config import watches
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind
from hybrid_operator.config.settings import Settings, split_ansible_args

pytestmark = pytest.mark.integration

GVK = GroupVersionKind("awx.ansible.com", "v1beta1", "AWX")
CR = {"apiVersion": "awx.ansible.com/v1beta1", "kind": "AWX",
      "metadata": {"name": "demo", "namespace": "default", "uid": "1"}, "spec": {}}
STATS_ROLE = """
- name: report
  ansible.builtin.set_stats:
    data: {found: "{{ role_name }}"}
    per_host: false
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("ANSIBLE_ROLES_PATH", "ANSIBLE_INVENTORY", "ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
async def runner(tmp_path: Path, home: Path) -> AsyncIterator[AnsibleRunner]:
    work = tmp_path / "work"
    work.mkdir()
    instance = AnsibleRunner(max_workers=1, timeout=120, work_dir=work, project_dir=tmp_path / "project")
    yield instance
    await instance.close()


def awx_like_project(root: Path) -> Path:
    """awx-operator's layout: watches.yaml, playbooks/awx.yml with a play-level ``roles: [installer]``,
    roles/installer depending on roles/common (meta/main.yml)."""
    write(root / "watches.yaml", "- version: v1beta1\n  group: awx.ansible.com\n  kind: AWX\n"
                                 "  playbook: playbooks/awx.yml\n  snakeCaseParameters: False\n")
    write(root / "playbooks" / "awx.yml", "- hosts: localhost\n  gather_facts: no\n  roles:\n    - installer\n")
    write(root / "roles" / "installer" / "meta" / "main.yml", "dependencies:\n  - role: common\n")
    write(root / "roles" / "installer" / "tasks" / "main.yml", STATS_ROLE)
    write(root / "roles" / "common" / "tasks" / "main.yml", "- ansible.builtin.debug: {msg: common}\n")
    return root / "watches.yaml"


def request(watch: AnsibleWatch, tmp_path: Path, env: dict[str, str], **options: Any) -> RunRequest:
    return RunRequest(cr=CR, watch=watch, artifacts_root=tmp_path / "artifacts", env=env, **options)


def env_for(watches_file: Path, environ: dict[str, str]) -> dict[str, str]:
    return ansible_env(Settings(watches_file=watches_file, environ=environ))


async def test_a_playbooks_play_roles_are_found_in_the_projects_roles(
        runner: AnsibleRunner, tmp_path: Path, home: Path) -> None:
    watches_file = awx_like_project(tmp_path / "project")
    environ = {"HOME": str(home)}
    watch = watches.load(watches_file, environ)[0]
    assert isinstance(watch, AnsibleWatch)

    result = await runner.run(request(watch, tmp_path, env_for(watches_file, environ)))

    assert result.succeeded, result.failure_message
    assert result.stats_data == {"found": "installer"}


async def test_roles_in_the_working_directory_are_found_too(
        runner: AnsibleRunner, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's {{CWD}}/roles: the operator started in another directory than the watches file's."""
    watches_file = awx_like_project(tmp_path / "project")
    cwd = tmp_path / "image-home"
    (cwd / "roles").mkdir(parents=True)
    (tmp_path / "project" / "roles" / "installer").rename(cwd / "roles" / "installer")
    monkeypatch.chdir(cwd)
    environ = {"HOME": str(home)}
    watch = watches.load(watches_file, environ)[0]
    assert isinstance(watch, AnsibleWatch)

    result = await runner.run(request(watch, tmp_path, env_for(watches_file, environ)))

    assert result.succeeded, result.failure_message
    assert result.stats_data == {"found": "installer"}


async def test_the_ansible_roles_path_flag_sets_the_roles_path(
        runner: AnsibleRunner, tmp_path: Path, home: Path) -> None:
    watches_file = awx_like_project(tmp_path / "project")
    elsewhere = tmp_path / "shared-roles"
    elsewhere.mkdir()
    (tmp_path / "project" / "roles" / "common").rename(elsewhere / "common")
    args = build_parser().parse_args(["run", "--watches-file", str(watches_file),
                                      "--ansible-roles-path", str(elsewhere)])
    environ = {**_environ(args), "HOME": str(home)}
    assert environ["ANSIBLE_ROLES_PATH"] == str(elsewhere)
    watch = watches.load(watches_file, environ)[0]
    assert isinstance(watch, AnsibleWatch)

    result = await runner.run(request(watch, tmp_path, env_for(watches_file, environ)))

    assert result.succeeded, result.failure_message
    roles_path = env_for(watches_file, environ)["ANSIBLE_ROLES_PATH"].split(":")
    assert roles_path[0] == str(elsewhere)
    assert str(tmp_path / "project" / "roles") in roles_path


async def test_ansible_inventory_is_copied_into_the_run(runner: AnsibleRunner, tmp_path: Path, home: Path) -> None:
    """The SDK's advanced-molecule-operator inventory: a group with group_vars, plus localhost plays."""
    inventory = tmp_path / "inventory"
    write(inventory / "hosts", "[test]\n127.0.0.1 ansible_connection=local\n")
    write(inventory / "group_vars" / "test.yml", "sentinel: test\n")
    playbook = write(tmp_path / "project" / "inventory.yml", """
- hosts: test
  gather_facts: no
  tasks:
    - ansible.builtin.set_stats:
        data: {sentinel: "{{ sentinel }}", groups: "{{ groups.test }}"}
        per_host: false
- hosts: localhost
  gather_facts: no
  tasks:
    - ansible.builtin.debug: {msg: hello}
""")
    watch = AnsibleWatch(gvk=GVK, playbook=playbook)
    env = {"ANSIBLE_INVENTORY": str(inventory)}

    result = await runner.run(request(watch, tmp_path, env))

    assert result.succeeded, result.failure_message
    assert result.stats_data == {"sentinel": "test", "groups": ["127.0.0.1"]}
    assert sorted(p.name for p in inventory.iterdir()) == ["group_vars", "hosts"]  # the original is untouched


async def test_a_play_that_matched_no_host_is_reported(runner: AnsibleRunner, tmp_path: Path, home: Path) -> None:
    inventory = write(tmp_path / "hosts.ini", "[web]\n")
    playbook = write(tmp_path / "project" / "nohosts.yml", """
- name: configure the web servers
  hosts: web
  gather_facts: no
  tasks:
    - ansible.builtin.debug: {msg: never}
""")
    result = await runner.run(request(AnsibleWatch(gvk=GVK, playbook=playbook), tmp_path,
                                      {"ANSIBLE_INVENTORY": str(inventory)}))

    assert result.succeeded  # as in the SDK: the stats event came and nothing failed
    assert result.unmatched_plays == ("'configure the web servers' (hosts: web)",)


async def test_a_missing_ansible_inventory_fails_the_run(runner: AnsibleRunner, tmp_path: Path, home: Path) -> None:
    playbook = write(tmp_path / "project" / "p.yml", "- hosts: localhost\n  gather_facts: no\n  tasks: []\n")
    result = await runner.run(request(AnsibleWatch(gvk=GVK, playbook=playbook), tmp_path,
                                      {"ANSIBLE_INVENTORY": str(tmp_path / "absent")}))

    assert not result.succeeded
    assert "ANSIBLE_INVENTORY" in (result.error or "")


async def test_vault_encrypted_vars_with_ansible_args_as_kubernetes_passes_them(
        runner: AnsibleRunner, tmp_path: Path, home: Path) -> None:
    """advanced-molecule-operator's argstest: ``--ansible-args='--vault-password-file <file>'`` in the
    Deployment's args arrives with the single quotes; vars.yml was made with ansible-vault encrypt_string."""
    password = write(tmp_path / "pwd.yml", "abc123\n")
    vault = Path(sys.executable).parent / "ansible-vault"
    encrypted = subprocess.run([str(vault), "encrypt_string", "--vault-password-file", str(password),
                                "thisisatest", "--name", "the_secret"],
                               capture_output=True, text=True, check=True, env={"HOME": str(home),
                                                                                 "PATH": str(vault.parent)})
    variables = write(tmp_path / "vars.yml", encrypted.stdout)
    playbook = write(tmp_path / "project" / "argstest.yml", f"""
- hosts: localhost
  gather_facts: no
  tasks:
    - ansible.builtin.include_vars:
        file: {variables}
        name: the_secret
    - ansible.builtin.set_stats:
        data: {{msg: "The decrypted value is {{{{ the_secret.the_secret }}}}"}}
        per_host: false
""")
    flag = f"'--vault-password-file {password}'"
    args = split_ansible_args(flag)
    assert args == ("--vault-password-file", str(password))

    result = await runner.run(request(AnsibleWatch(gvk=GVK, playbook=playbook), tmp_path, {},
                                      ansible_args=args))

    assert result.succeeded, result.failure_message
    assert result.stats_data == {"msg": "The decrypted value is thisisatest"}


@pytest.mark.parametrize(("text", "expected"), [
    ("", ()),
    ("--check", ("--check",)),
    ("'--vault-password-file /opt/ansible/pwd.yml'", ("--vault-password-file", "/opt/ansible/pwd.yml")),
    ("--extra-vars 'a=1 b=2'", ("--extra-vars", "a=1 b=2")),
    ("''", ()),
])
def test_ansible_args_are_split_as_the_sdk_reads_them(text: str, expected: tuple[str, ...]) -> None:
    assert split_ansible_args(text) == expected


def test_unbalanced_ansible_args_stop_the_operator_at_startup(tmp_path: Path) -> None:
    from hybrid_operator import errors
    from hybrid_operator.cli.commands import _settings

    args = build_parser().parse_args(["run", "--ansible-args", "--extra-vars 'a=1"])
    with pytest.raises(errors.ConfigurationError, match="--ansible-args"):
        _settings(args, None)


async def test_community_kubernetes_names_resolve_to_kubernetes_core(
        runner: AnsibleRunner, tmp_path: Path, home: Path) -> None:
    """Older SDK scaffolds required community.kubernetes (not on PyPI, Galaxy unreachable): we ship its redirects."""
    playbook = write(tmp_path / "project" / "old.yml", """
- hosts: localhost
  gather_facts: no
  collections: [community.kubernetes]
  tasks:
    - community.kubernetes.k8s_info: {kind: Namespace, kubeconfig: /nonexistent/kubeconfig}
""")
    watches_file = write(tmp_path / "project" / "watches.yaml", "[]\n")
    result = await runner.run(request(AnsibleWatch(gvk=GVK, playbook=playbook), tmp_path,
                                      env_for(watches_file, {"HOME": str(home)})))
    assert not result.succeeded
    assert "couldn't resolve module" not in result.failure_message.lower()
    assert result.failed_tasks and "kubeconfig" in result.failure_message.lower(), result.failure_message
