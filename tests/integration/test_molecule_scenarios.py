"""The repository's molecule scenarios (molecule/<kind>/) against one embedded cluster.

A scenario reuses the module's cluster (MOLECULE_KUBECONFIG), installs the CRDs, runs the
operator, applies its sample, waits for the success condition and the objects the sample creates,
then deletes them and stops its operator. molecule runs from the virtualenv with the default driver.

Every scenario runs the same shared playbooks (molecule/shared/); only the kind differs, and each
kind has its own e2e tests. So the suite runs one representative scenario, ``website`` (a role, a
finalizer playbook, two child objects, cleanup waiting on the finalizer); ``make molecule`` runs
them all (``molecule test --all``), and so does ``MOLECULE_SCENARIOS=all pytest ...`` here, or a
comma-separated list of scenario names.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hybrid_operator.config import watches
from support.cluster import REPO, Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BIN = Path(sys.executable).parent
#: the module's namespace (tests/conftest.py): not "molecule-...", which the cleanup check looks for
SHARED_NAMESPACE = "scenarios"
SCENARIOS = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))
REPRESENTATIVE = "website"
CHOSEN = os.environ.get("MOLECULE_SCENARIOS", REPRESENTATIVE)
RUN = SCENARIOS if CHOSEN == "all" else [name.strip() for name in CHOSEN.split(",") if name.strip()]


def molecule(cluster: Cluster, *args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = cluster.env()
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", MOLECULE_KUBECONFIG=str(cluster.kubeconfig),
               ANSIBLE_FORCE_COLOR="0", NO_COLOR="1")
    return subprocess.run([str(BIN / "molecule"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_molecule_is_installed(shared_cluster: Cluster) -> None:
    result = molecule(shared_cluster, "--version")
    assert result.returncode == 0, result.stderr
    assert "molecule 26." in result.stdout


def test_every_kind_has_a_scenario() -> None:
    kinds = {watch.gvk.kind.lower() for watch in watches.load(REPO / "watches.yaml")}
    assert kinds <= set(SCENARIOS), f"kinds without molecule/<kind>/molecule.yml: {sorted(kinds - set(SCENARIOS))}"


def test_the_representative_scenario_exists() -> None:
    assert REPRESENTATIVE in SCENARIOS
    unknown = sorted(set(RUN) - set(SCENARIOS))
    assert not unknown, f"MOLECULE_SCENARIOS names scenarios molecule/ does not have: {unknown}"


def test_scenarios_pass_against_the_embedded_cluster(shared_cluster: Cluster) -> None:
    targets = ["--all"] if RUN == SCENARIOS else [arg for name in RUN for arg in ("-s", name)]
    result = molecule(shared_cluster, "test", *targets)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    recap = output[output.rindex("SCENARIO RECAP"):]
    for scenario in RUN:
        assert re.search(rf"(?m)^{scenario}\s+: actions=7\s+successful=7 .* failed=0", recap), recap
    left = shared_cluster.kubectl("get", "namespaces", "-o", "name").stdout
    assert "molecule-" not in left.replace("Terminating", ""), "cleanup deletes each scenario's namespace"
