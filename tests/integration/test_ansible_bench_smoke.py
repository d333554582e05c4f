"""Smoke run of `make bench --quick` (benchmarks/bench.py): the table is printed with its rows.

No timing is asserted (the machine is shared); only that the rows are there, so the bench cannot rot.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXPECTED = [
    "one-task playbook run, warm runner",
    "one-task playbook run, cold runner",
    "2 one-task runs at once, warm",
    "peak RSS of the process tree",
    "one-task role, CR create → Successful",
    "one `k8s` ConfigMap task role, CR create → Successful",
    "3 ConfigMap CRs created at once → all Successful",
    "peak RSS of the operator's process tree during the 3-CR burst",
    "peak PSS of the operator's process tree during the 3-CR burst",
    "2 idle CRs, 3 s period: interval between runs of a CR, median",
    "operator RSS idle with 10 CRs",
    "warm worker RSS idle",
    "Helm no-change resync",
]


def test_quick_bench_prints_the_table(tmp_path: Path) -> None:
    output = tmp_path / "performance.md"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench.py"), "--quick", "--output", str(output)],
                          capture_output=True, text=True, timeout=900, check=False)

    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    for figure in EXPECTED:
        assert any(row.startswith(f"| {figure}") for row in rows), (figure, done.stdout)
    # every runner and end-to-end row has a value against its baseline (the Helm rows are helm_bench's)
    measured = [row for row in rows if "one-task playbook run" in row or "CR create" in row or "at once" in row]
    assert all(row.split("|")[5].strip().endswith("x") for row in measured), measured
    assert "load average" in output.read_text()
