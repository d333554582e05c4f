"""``hybrid-operator check`` on hostile watches files (docs/security.md, "watches.yaml").

Run as a user runs it (a subprocess, exit code and stderr), under a memory limit and a timeout, so
an expanded alias bomb fails the test instead of the machine. Paths that climb out of the project
through ``..`` and alias bombs are exit 2 naming the entry and key; absolute paths, which SDK images
use (``playbook: /opt/ansible/playbooks/x.yml``), stay valid.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from support.attacker import write_project

pytestmark = [pytest.mark.security, pytest.mark.integration]

MEMORY_LIMIT = 1024 * 1024 * 1024
PLAYBOOK = "- hosts: localhost\n  gather_facts: false\n  tasks: []\n"
ENTRY = "- group: security.hybrid.dev\n  version: v1\n  kind: {kind}\n"


def check(watches: Path) -> subprocess.CompletedProcess[str]:
    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run([sys.executable, "-m", "hybrid_operator.cli", "check", "--watches-file", str(watches)],
                          capture_output=True, text=True, timeout=60, preexec_fn=limit_memory, check=False)


def bomb(levels: int = 9) -> str:
    """A YAML alias bomb: ``levels`` lists of 10 aliases to the previous level (10**levels values)."""
    lines = ['    l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, levels):
        lines.append(f"    l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    write_project(directory, {"playbooks/site.yml": PLAYBOOK, "roles/inside/tasks/main.yml": "[]\n"})
    (tmp_path / "outside" / "tasks").mkdir(parents=True)
    (tmp_path / "outside" / "tasks" / "main.yml").write_text("[]\n")
    (tmp_path / "outside.yml").write_text(PLAYBOOK)
    (tmp_path / "chart" / "templates").mkdir(parents=True)
    (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: chart\nversion: 0.1.0\n")
    return directory


ESCAPES = [
    ("playbook", "  playbook: ../../../../../../../../etc/passwd\n", "playbook"),
    ("playbook-next-door", "  playbook: ../outside.yml\n", "playbook"),
    ("role", "  role: ../../outside\n", "role"),  # roles/../../outside: a role directory next to the project
    ("nested", "  playbook: playbooks/../../outside.yml\n", "playbook"),
    ("finalizer", "  playbook: playbooks/site.yml\n  finalizer:\n    name: security.hybrid.dev/cleanup\n"
                  "    playbook: ../outside.yml\n", "finalizer.playbook"),
    ("chart", "  chart: ../chart\n", "chart"),
]


@pytest.mark.parametrize(("body", "key"), [case[1:] for case in ESCAPES], ids=[case[0] for case in ESCAPES])
def test_paths_leaving_the_project_are_errors(project: Path, body: str, key: str) -> None:
    watches = project / "watches.yaml"
    watches.write_text(ENTRY.format(kind="Escape") + body)
    result = check(watches)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "entry 1 (kind Escape)" in result.stderr and f'key "{key}"' in result.stderr
    assert "leaves the project directory" in result.stderr


def test_absolute_and_in_project_paths_stay_valid(project: Path, tmp_path: Path) -> None:
    watches = project / "watches.yaml"
    watches.write_text(ENTRY.format(kind="Absolute") + f"  playbook: {tmp_path / 'outside.yml'}\n"
                       + ENTRY.format(kind="Inside") + "  role: inside\n"
                       + ENTRY.format(kind="Dotted") + "  playbook: ./playbooks/../playbooks/site.yml\n")
    result = check(watches)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("where", ["vars", "finalizer"])
def test_yaml_alias_bombs_are_errors_naming_the_entry(project: Path, where: str) -> None:
    watches = project / "watches.yaml"
    prefix = "  finalizer:\n    name: security.hybrid.dev/cleanup\n    vars:\n" if where == "finalizer" else "  vars:\n"
    body = bomb().replace("\n    ", "\n      ") if where == "finalizer" else bomb()
    watches.write_text(ENTRY.format(kind="Fine") + "  playbook: playbooks/site.yml\n"
                       + ENTRY.format(kind="Bomb") + "  playbook: playbooks/site.yml\n" + prefix
                       + ("  " if where == "finalizer" else "") + body)
    assert len(watches.read_bytes()) < 2048
    result = check(watches)
    assert result.returncode == 2, result.stdout + result.stderr[-2000:]
    assert "entry 2 (kind Bomb)" in result.stderr and f'key "{where}"' in result.stderr
    assert "alias" in result.stderr and "Traceback" not in result.stderr


def test_a_recursive_alias_is_an_error(project: Path) -> None:
    watches = project / "watches.yaml"
    watches.write_text(ENTRY.format(kind="Loop") + "  playbook: playbooks/site.yml\n  vars: &v\n    self: *v\n")
    result = check(watches)
    assert result.returncode == 2, result.stdout + result.stderr[-2000:]
    assert "entry 1 (kind Loop)" in result.stderr and "recursive alias" in result.stderr
