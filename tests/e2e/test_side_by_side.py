"""Two `make run` in two checkouts at once, and a molecule run beside them: nothing collides.

Each "checkout" is a copy of this repository's project files (Makefile, watches.yaml, roles,
playbooks, charts, config, molecule) sharing this checkout's virtualenv (`make -o
.venv/.setup-done`: the copies' setup is this one's). To keep the 2-core budget, each copy keeps
one sample (the Website). The first `make run` takes its port through `ARGS`; the second, started
on the same port, stops at once saying which `ARGS` to use, then runs on another; metrics and probes
of both take free ports and print them. Molecule's website scenario then runs in the first copy
while both are up, and each `make run` is stopped with SIGINT (exit 0, no traceback).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cluster import REPO, find_binary, free_port
from support.makerun import MakeRun
from support.operator import wait_for

# two `up` and a molecule scenario at once take minutes of CPU on 2 cores: with the newcomer's path
# in `make test-newcomer`, not in `make test`
pytestmark = [pytest.mark.newcomer, pytest.mark.slow]

VENV = Path(sys.executable).parent.parent
SAMPLE = "web_v1alpha1_website.yaml"


def checkout(target: Path) -> Path:
    target.mkdir()
    for name in ("Makefile", "pyproject.toml", "requirements.lock", "watches.yaml"):
        shutil.copy2(REPO / name, target / name)
    for folder in ("scripts", "roles", "playbooks", "charts", "config", "molecule"):
        shutil.copytree(REPO / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for sample in (target / "config" / "samples").iterdir():
        if sample.name != SAMPLE:
            sample.unlink()
    (target / ".venv").symlink_to(VENV)
    return target


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("home")
    environ = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "MOLECULE_KUBECONFIG", "MAKEFLAGS")}
    environ.update(HOME=str(home), NO_COLOR="1", ANSIBLE_FORCE_COLOR="0",
                   PATH=f"{VENV / 'bin'}{os.pathsep}{environ.get('PATH', '')}")
    return environ


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Iterator[list[MakeRun]]:
    root = tmp_path_factory.mktemp("checkouts")
    first_dir, second_dir = checkout(root / "first"), checkout(root / "second")
    started: list[MakeRun] = []
    try:
        port = free_port()
        started.append(MakeRun(first_dir, f"--port {port}", env, "-o", ".venv/.setup-done"))
        started[0].printed(r"metrics: http://127\.0\.0\.1:\d+/metrics")
        # the same port again: refused at once, saying what to pass
        clash = subprocess.run(["make", "--no-print-directory", "-o", ".venv/.setup-done", "run",
                                f"ARGS=--port {port}"], cwd=second_dir, env=env, capture_output=True, text=True,
                               timeout=120, check=False)
        assert clash.returncode == 2, clash.stdout + clash.stderr
        assert f"Port {port} is taken (another `make run`?)" in clash.stderr
        assert f"make run ARGS='--port {port + 1}'" in clash.stderr
        assert "Traceback" not in clash.stdout + clash.stderr
        started.append(MakeRun(second_dir, f"--port {free_port()}", env, "-o", ".venv/.setup-done"))
        started[1].printed(r"metrics: http://127\.0\.0\.1:\d+/metrics")
        yield started
        for run in started:
            assert run.interrupt() == 0, run.output()[-4000:]
            assert "Traceback" not in run.output(), run.output()[-4000:]
    finally:
        for run in started:
            run.kill()


def kubectl_json(run: MakeRun, env: dict[str, str], *args: str) -> Any:
    environ = {**env, "KUBECONFIG": str(run.project / ".hybrid" / "kubeconfig")}
    result = subprocess.run([find_binary("kubectl"), "get", *args, "-o", "json"], env=environ, capture_output=True,
                            text=True, timeout=60, check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def successful(obj: Any) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Successful" and c.get("status") == "True" for c in conditions)


def test_both_make_runs_reconcile_and_serve_their_own_metrics(runs: list[MakeRun], env: dict[str, str]) -> None:
    for run in runs:
        wait_for(lambda r=run: successful(kubectl_json(r, env, "website", "hello")),
                 f"the Website sample of {run.project.name} to succeed", timeout=240)
    addresses = [run.printed(r"metrics: http://127\.0\.0\.1:\d+/metrics").split(" ", 1)[1] for run in runs]
    probes = [run.printed(r"probes:  http://127\.0\.0\.1:\d+/healthz").split()[1] for run in runs]
    assert len(set(addresses)) == 2 and len(set(probes)) == 2
    for address in addresses:
        with urllib.request.urlopen(address, timeout=10) as response:
            assert b"hybrid_operator_watch_healthy" in response.read()
    for probe in probes:
        with urllib.request.urlopen(probe, timeout=10) as response:
            assert response.status == 200


def test_molecule_runs_beside_both(runs: list[MakeRun], env: dict[str, str]) -> None:
    project = runs[0].project
    # a bound, not the expected time (about a minute on an idle 2-core machine; ten on a busy one)
    result = subprocess.run([str(VENV / "bin" / "molecule"), "test", "-s", "website"], cwd=project, env=env,
                            capture_output=True, text=True, timeout=1500, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    recap = output[output.rindex("SCENARIO RECAP"):]
    assert re.search(r"(?m)^website\s+: actions=7\s+successful=7 .* failed=0", recap), recap
    # its operator's log outlives molecule's temporary directory
    assert "operator started" in (project / ".hybrid" / "molecule" / "website" / "operator.log").read_text()
    for run in runs:
        assert run.process.poll() is None, run.output()[-3000:]
