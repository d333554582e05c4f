"""`hybrid-operator check` as a user runs it: exit codes and messages on real files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parent.parent / "unit" / "fixtures" / "watches"
BROKEN = sorted(FIXTURES.glob("broken-*.yaml"))


def check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hybrid_operator.cli", "check", "--watches-file", str(path)],
                          capture_output=True, text=True, check=False, timeout=60)


def test_there_are_at_least_fifteen_broken_files() -> None:
    assert len(BROKEN) >= 15


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_each_broken_file_exits_2_naming_the_file(path: Path) -> None:
    result = check(path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert str(path) in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("path", [p for p in BROKEN if p.stem not in (
    "broken-empty", "broken-not-a-list", "broken-invalid-yaml", "broken-duplicate-gvk", "broken-duplicate-yaml-key",
    "broken-many-problems")], ids=lambda p: p.stem)
def test_entry_errors_name_the_entry_and_the_key(path: Path) -> None:
    message = check(path).stderr
    assert re.search(r"entry \d+", message), message
    # the offending key is named, either as `key "x"` or, for combinations, by the keys involved
    assert re.search(r'key "\w+"|playbook|role|chart|kind', message), message


def test_valid_file_exits_0_and_lists_the_kinds() -> None:
    result = check(FIXTURES / "valid.yaml")
    assert result.returncode == 0, result.stderr
    assert "cache.example.com/v1alpha1 Memcached: ansible playbook" in result.stdout
    assert "web.example.com/v1 Nginx: helm chart" in result.stdout


def test_missing_file_exits_2() -> None:
    result = check(FIXTURES / "does-not-exist.yaml")
    assert result.returncode == 2
    assert "does-not-exist.yaml" in result.stderr
