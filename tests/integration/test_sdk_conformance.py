"""The Operator SDK's own Ansible test operators on hybrid-operator (opt-in): ``make conformance``.

Why this exists: operators written for the SDK must run unchanged, measured against operators
nobody here wrote. Those operators are not part of this repository, so this test runs only when
``HYBRID_SDK_CHECKOUTS`` names checkouts of them (memcached-molecule-operator,
advanced-molecule-operator; separated by ``os.pathsep``). Each is run by ``scripts/conformance.py``,
which prints PASS, FAIL or SKIP per molecule test file and exits non-zero when one failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent.parent
CHECKOUTS = [path for path in os.environ.get("HYBRID_SDK_CHECKOUTS", "").split(os.pathsep) if path]


@pytest.mark.skipif(not CHECKOUTS, reason="set HYBRID_SDK_CHECKOUTS to checkouts of the SDK's test operators")
@pytest.mark.parametrize("checkout", CHECKOUTS)
def test_sdk_test_operator_passes_its_molecule_tests(checkout: str) -> None:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "conformance.py"), checkout],
                          capture_output=True, text=True, timeout=3600, check=False)
    print(done.stdout)
    assert done.returncode == 0, f"{checkout}:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    written = REPO / ".hybrid" / "conformance" / Path(checkout).resolve().name / "results.json"
    results = json.loads(written.read_text())
    assert results and all(result["status"] in ("PASS", "SKIP") for result in results), results
    assert any(result["status"] == "PASS" for result in results), results
