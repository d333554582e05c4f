"""Fixtures of the integration tests: ``isolated_home``, a HOME of the test's own for Ansible runs, and no
Ansible settings from the machine's environment.

Ansible reads ``~/.ansible.cfg``, ``~/.ansible/`` and ``ANSIBLE_*`` variables: a test that runs playbooks
gets a fresh HOME and none of the variables that change where roles, configuration or facts come from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: cleared for every test using :func:`isolated_home`
CLEARED = ("ANSIBLE_GATHERING", "ANSIBLE_ROLES_PATH", "ANSIBLE_CONFIG", "KUBECONFIG")


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)
    return home
