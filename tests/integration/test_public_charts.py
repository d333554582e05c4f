"""Real public charts through install, upgrade, rollback, helm test and uninstall --wait (opt-in).

Why this exists: the embedded cluster must run the charts users bring, unchanged and with helm's
default flags, persistence included.  The charts are not part of this repository, so this test
runs only when ``HYBRID_CHART_CHECKOUTS`` names checkouts of chart repositories (work trees or
bare git dirs, separated by ``os.pathsep``), e.g. prometheus-community/helm-charts,
grafana/helm-charts and kubernetes/ingress-nginx; it runs ``scripts/public_charts.py`` on them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent.parent
CHECKOUTS = [path for path in os.environ.get("HYBRID_CHART_CHECKOUTS", "").split(os.pathsep) if path]


@pytest.mark.skipif(not CHECKOUTS, reason="set HYBRID_CHART_CHECKOUTS to checkouts of chart repositories")
def test_public_charts_pass_their_whole_life_cycle() -> None:
    arguments = [argument for checkout in CHECKOUTS for argument in ("--checkout", checkout)]
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "public_charts.py"), *arguments],
                          capture_output=True, text=True, timeout=1800, check=False)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
