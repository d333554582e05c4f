"""The authoring workflow of a new project, as a user types it, in a temporary directory.

init → create api (role) → create api (new chart) → make manifests → hybrid-operator up (its own
port and data dir) → the samples reach success → molecule test of the role kind's scenario (starting
its own embedded cluster; marker ``newcomer``, so in ``make test-newcomer``, beside
tests/e2e/test_newcomer.py's ``make molecule`` of a new project). ``make test`` runs the repository's
``website`` scenario instead (tests/integration/test_molecule_scenarios.py): the same shared playbooks
and a scenario file exactly as ``create api`` writes it (tests/unit/test_scaffold.py checks both).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cluster import find_binary, free_port
from support.operator import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BIN = Path(sys.executable).parent
HYBRID = str(BIN / "hybrid-operator")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("authoring")


@pytest.fixture(scope="module")
def env(workdir: Path) -> dict[str, str]:
    home = workdir / "home"
    home.mkdir()
    environ = dict(os.environ)
    environ.update(HOME=str(home), PATH=f"{BIN}{os.pathsep}{environ.get('PATH', '')}", NO_COLOR="1",
                   ANSIBLE_FORCE_COLOR="0", KUBECONFIG=str(workdir / "kubeconfig"))
    return environ


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def project(workdir: Path, env: dict[str, str]) -> Path:
    run([HYBRID, "init", "--domain", "example.com", "shop-operator"], workdir, env)
    root = workdir / "shop-operator"
    run([HYBRID, "create", "api", "--group", "shop", "--version", "v1alpha1", "--kind", "Shop", "--generate-role"],
        root, env)
    run([HYBRID, "create", "api", "--group", "cache", "--version", "v1", "--kind", "Cache", "--new-chart"], root, env)
    return root


def test_make_manifests_is_up_to_date_after_create_api(project: Path, env: dict[str, str]) -> None:
    # this checkout's hybrid-operator, without the project's own setup (tests/e2e/test_newcomer.py does that)
    result = run(["make", "--no-print-directory", "-o", ".venv/.setup-done", "manifests", f"HYBRID_OPERATOR={HYBRID}"],
                 project, env)
    assert "manifests are up to date" in result.stdout
    crds = sorted(p.name for p in (project / "config" / "crd").glob("*.yaml"))
    assert crds == ["cache.example.com_caches.yaml", "shop.example.com_shops.yaml"]
    run([HYBRID, "check"], project, env)


@pytest.fixture
def up(project: Path, workdir: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    # metrics and probes on free ports: :8080/:8081 may be taken by anything else on the machine
    command = [HYBRID, "--log-format", "json", "up", "--port", str(free_port()), "--data-dir",
               str(workdir / "cluster"), "--kubeconfig", env["KUBECONFIG"], "--artifacts-dir",
               str(workdir / "runner"), "--no-summary",
               "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"]
    with (workdir / "up.log").open("ab") as log:
        process = subprocess.Popen(command, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: Path(env["KUBECONFIG"]).exists() or process.poll() is not None, "the local cluster")
        # the kubeconfig is written when the cluster answers; `up` installs the CRDs after that
        wait_for(lambda: process.poll() is not None or subprocess.run(
            [find_binary("kubectl"), "get", "shops.shop.example.com,caches.cache.example.com"], env=env,
            capture_output=True, timeout=30, check=False).returncode == 0, "the CRDs to be served")
        assert process.poll() is None, (workdir / "up.log").read_text()[-3000:]
        yield env
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def kubectl_json(env: dict[str, str], *args: str) -> dict[str, Any] | None:
    result = subprocess.run([find_binary("kubectl"), "get", *args, "-o", "json"], env=env, capture_output=True,
                            text=True, timeout=60, check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def condition_true(obj: dict[str, Any] | None, kind: str) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def test_up_reconciles_both_samples(project: Path, up: dict[str, str]) -> None:
    subprocess.run([find_binary("kubectl"), "apply", "-f", str(project / "config" / "samples")], env=up,
                   capture_output=True, text=True, timeout=60, check=True)
    wait_for(lambda: condition_true(kubectl_json(up, "shop", "shop-sample"), "Successful"),
             "the Shop sample to succeed")
    shop = kubectl_json(up, "shop", "shop-sample")
    assert shop is not None and shop["status"]["configMap"] == "shop-sample-shop"
    config_map = kubectl_json(up, "configmap", "shop-sample-shop")
    assert config_map is not None and config_map["data"]["message"] == "Hello from shop-sample"
    wait_for(lambda: condition_true(kubectl_json(up, "cache", "cache-sample"), "Deployed"),
             "the Cache release to be deployed")
    deployment = kubectl_json(up, "deployment", "cache-sample")
    assert deployment is not None and deployment["spec"]["replicas"] == 1


@pytest.mark.newcomer
def test_the_molecule_scenario_of_the_new_role_kind_passes(project: Path, env: dict[str, str], workdir: Path) -> None:
    assert sorted(p.parent.name for p in (project / "molecule").glob("*/molecule.yml")) == ["cache", "shop"]
    scenario_env = {key: value for key, value in env.items() if key not in ("KUBECONFIG", "MOLECULE_KUBECONFIG")}
    result = subprocess.run([str(BIN / "molecule"), "test", "-s", "shop"], cwd=project, env=scenario_env,
                            capture_output=True, text=True, timeout=600, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    recap = output[output.rindex("SCENARIO RECAP"):]
    assert any(line.startswith("shop") and "failed=0" in line and "successful=7" in line
               for line in recap.splitlines()), recap
    scenario = yaml.safe_load((project / "molecule" / "shop" / "molecule.yml").read_text())
    assert scenario["driver"]["name"] == "default"
