"""The repository layout rules that tools would otherwise only report on a clean clone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from support.scheduling import ESTIMATED_SECONDS, TESTS

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_test_module_names_are_unique() -> None:
    # pytest imports test modules by basename (tests/ dirs are not packages): duplicates collide.
    names = Counter(path.name for path in (REPO / "tests").rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []


def test_operator_dir_is_not_a_package() -> None:
    # operator/__init__.py would shadow the standard library's `operator` module.
    assert not (REPO / "operator" / "__init__.py").exists()


def test_the_scheduling_estimates_name_files_that_exist() -> None:
    missing = [name for name in ESTIMATED_SECONDS if not (TESTS / name).is_file()]
    assert not missing, f"tests/support/scheduling.py ESTIMATED_SECONDS names files that do not exist: {missing}"
