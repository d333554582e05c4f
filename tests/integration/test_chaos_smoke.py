"""Smoke run of `make chaos`: `--quick` must run every scenario and print the table, 0 lost, 0 duplicated.

The figures themselves (how fast things converge) are not asserted: the machine is shared. What is
asserted is what the suite promises a user: every scenario ran and converged, no acknowledged write
was lost, no work was done twice. Two scenarios run at a time (``--jobs 2``): each has its own cluster
and operator, and a scenario is mostly waiting, so this halves the smoke run's share of ``make test``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.chaos]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "chaos.py"
SCENARIOS = ("operator kill -9 mid-playbook", "operator kill -9 mid-helm-install",
             "operator kill -9 mid-helm-upgrade", "helm left running by a dead operator",
             "cluster kill -9 during a 200-create burst", "API unreachable", "conflict storm", "event storm",
             "soak:", "two operators, two kinds, one release name")


def rows(output: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        if line.startswith("| ") and not line.startswith("| scenario"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            found[cells[0]] = cells[1:]
    return found


def test_the_quick_chaos_run_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    document = tmp_path / "reliability.md"
    document.write_text("# figures\n\n<!-- chaos:begin -->\nold\n<!-- chaos:end -->\ntail\n")
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--jobs", "2", "--output", str(document)],
                            check=False, capture_output=True, text=True, timeout=1500, cwd=REPO)
    table = rows(result.stdout)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-5000:]}"
    for scenario in SCENARIOS:
        matching = [name for name in table if name.startswith(scenario)]
        assert len(matching) == 1, f"no row for {scenario!r} in:\n{result.stdout}"
        tries, survived, lost, duplicated = (int(cell) for cell in table[matching[0]][:4])
        assert tries >= 1 and survived == tries and lost == 0 and duplicated == 0, table[matching[0]]
    written = document.read_text()
    assert written.startswith("# figures\n") and written.endswith("<!-- chaos:end -->\ntail\n")
    assert "| scenario | tries |" in written and "old" not in written and "nproc: " in written
