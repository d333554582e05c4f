"""Smoke run of the cluster benchmark: `--quick` must finish and print a complete table.

No timing is asserted (the machine is shared); only that every metric row is
there with numbers, so `make bench-cluster` cannot silently rot.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "cluster_bench.py"

# (row label pattern, whether the row has a baseline and a ratio)
EXPECTED_ROWS = [
    (r"creates/s, 1 client \(sequential, keep-alive HTTPS\)", True),
    (r"creates/s, 8 concurrent clients", True),
    (r"creates/s, 1 client vs SQLite insert\+commit per row", True),
    (r"LIST latency, 100 objects \(ms, median of \d+\)", True),
    (r"LIST latency, 500 objects \(ms, median of \d+\)", True),
    (r"watch delivery p50 \(ms, \d+ watchers\)", False),
    (r"watch delivery p99 \(ms, \d+ watchers\)", False),
    (r"server RSS, empty \(MiB\)", False),
    (r"server RSS, 500 objects \(MiB\)", True),
    (r"startup to kubeconfig, empty data dir \(ms\)", False),
    (r"startup to first GET, empty data dir \(ms\)", False),
    (r"startup to kubeconfig, 500 objects \(ms\)", False),
    (r"startup to first GET, 500 objects \(ms\)", False),
]


def table_rows(output: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in output.splitlines():
        if line.startswith("| ") and not line.startswith("| metric"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def quick_output() -> str:
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick"], check=False, capture_output=True,
                            text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def test_machine_facts_are_printed(quick_output: str) -> None:
    assert re.search(r"^- nproc: \d+", quick_output, re.MULTILINE)
    assert re.search(r"^- Python: 3\.\d+\.\d+", quick_output, re.MULTILINE)
    assert "quick mode" in quick_output
    assert "Total benchmark time:" in quick_output


@pytest.mark.parametrize(("label", "has_baseline"), EXPECTED_ROWS)
def test_every_row_has_numbers(quick_output: str, label: str, has_baseline: bool) -> None:
    rows = table_rows(quick_output)
    matching = [name for name in rows if re.fullmatch(label, name)]
    assert len(matching) == 1, f"row {label!r} not found in:\n{quick_output}"
    value, baseline, ratio = rows[matching[0]]
    assert is_number(value) and float(value) >= 0, value
    if has_baseline:
        assert is_number(baseline) and float(baseline) > 0, baseline
        assert is_number(ratio), ratio
    else:
        assert (baseline, ratio) == ("-", "-")


def test_no_unexpected_rows(quick_output: str) -> None:
    rows = table_rows(quick_output)
    assert len(rows) == len(EXPECTED_ROWS), list(rows)
