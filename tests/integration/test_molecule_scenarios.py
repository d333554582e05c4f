"""The repository's molecule scenarios (molecule/<kind>/) against one embedded cluster.

A scenario reuses the module's cluster (MOLECULE_KUBECONFIG), installs the CRDs, runs the
operator, applies its sample, waits for the success condition and the objects the sample creates,
then deletes them and stops its operator. molecule runs from the virtualenv with the default driver.

Every scenario runs the same shared playbooks (molecule/shared/); only the kind differs, and each
kind has its own e2e tests. So the suite runs one representative scenario, ``website`` (a role, a
finalizer playbook, two child objects, cleanup waiting on the finalizer); ``make molecule`` runs
them all (``molecule test --all``), and so does ``MOLECULE_SCENARIOS=all pytest ...`` here, or a
comma-separated list of scenario names. A scenario whose operator cannot start fails its verify at
once, showing the end of the operator's log (kept in ``.hybrid/molecule/<scenario>/``).
"""

from __future__ import annotations

import os
import re
import shutil
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


def test_an_operator_that_exits_at_once_fails_verify_at_once_with_its_log(shared_cluster: Cluster,
                                                                        tmp_path: Path) -> None:
    """A project whose operator cannot start: verify says so within seconds and shows why."""
    project = tmp_path / "project"
    for folder in ("molecule", "config", "roles", "playbooks"):
        shutil.copytree(REPO / folder, project / folder)
    watches_text = (REPO / "watches.yaml").read_text()
    assert "role: website\n" in watches_text
    (project / "watches.yaml").write_text(watches_text.replace("role: website\n", "role: websites\n"))
    (project / "charts").symlink_to(REPO / "charts")
    result = molecule(shared_cluster, "test", "-s", "website", cwd=project)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-6000:]
    assert "The operator is running" in output and "The end of the operator's log" in output, output[-6000:]
    assert "role 'websites' was not found" in output, output[-6000:]
    log = project / ".hybrid" / "molecule" / "website" / "operator.log"
    assert f"its whole log: {log}" in output
    assert "role 'websites' was not found" in log.read_text(), "the log outlives molecule's temporary directory"
    # verify does not poll the 90 attempts for a resource nobody reconciles: it stops at once
    retries = output.count("FAILED - RETRYING")
    assert retries <= 3, f"verify polled {retries} times for an operator that had exited"
