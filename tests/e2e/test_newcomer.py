"""The newcomer's path of docs/authoring.md, step for step, in an empty temporary directory.

`hybrid-operator init`, `create api --generate-role`, a role of the user's own that makes a ConfigMap
from a spec field, `make setup` (a virtualenv of the new project's own, installing hybrid-operator
from this checkout and everything else offline from the local package index), `make run` in the
background on a port given through ARGS (metrics and probes on free ports), a CR applied, seen
Successful, changed; an edit of the role taking effect at the next event; `make molecule` beside
the running `make run`; and Ctrl-C typed on `make run`'s terminal while a reconcile runs: exit 0, the reconcile
finished, no traceback.

`make setup` installs every dependency into a new virtualenv, which takes minutes on a 2-core
machine: this module is marked ``newcomer`` and runs with `make test-newcomer`, not `make test`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cluster import find_binary, free_port
from support.makerun import MakeRun
from support.operator import wait_for

pytestmark = [pytest.mark.newcomer, pytest.mark.slow]

SCAFFOLDING = Path(sys.executable).parent / "hybrid-operator"

ROLE = """\
---
- name: The Shop's ConfigMap, greeting from its spec
  kubernetes.core.k8s:
    state: present
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-greeting"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        greeting: "{{ greeting }}"

- name: Take a while when asked (spec.delay seconds)
  ansible.builtin.wait_for:
    timeout: "{{ delay | int }}"
  when: delay | int > 0
"""
DEFAULTS = "---\ngreeting: Hello\ndelay: 0\n"


def sh(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"{args}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("home")
    environ = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "MOLECULE_KUBECONFIG", "MAKEFLAGS", "VIRTUAL_ENV", "PYTHONPATH")}
    # the new project's make finds its own .venv/bin first; kubectl comes from this checkout's
    environ.update(HOME=str(home), NO_COLOR="1", ANSIBLE_FORCE_COLOR="0",
                   PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
                   PATH=os.pathsep.join([str(Path(find_binary("kubectl")).parent),
                                         *[p for p in environ.get("PATH", "").split(os.pathsep)
                                           if p != str(SCAFFOLDING.parent)]]))
    return environ


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    root = tmp_path_factory.mktemp("shop")
    sh([str(SCAFFOLDING), "init", "--domain", "example.com"], root, env)
    sh([str(SCAFFOLDING), "create", "api", "--group", "shop", "--version", "v1alpha1", "--kind", "Shop",
        "--generate-role"], root, env)
    (root / "roles" / "shop" / "tasks" / "main.yml").write_text(ROLE)
    (root / "roles" / "shop" / "defaults" / "main.yml").write_text(DEFAULTS)
    scenario = root / "molecule" / "shop" / "molecule.yml"
    scenario.write_text(scenario.read_text().replace("name: shop-sample-shop", "name: shop-sample-greeting"))
    started = time.monotonic()
    sh(["make", "--no-print-directory", "setup"], root, env, timeout=1500)
    print(f"make setup of the new project: {time.monotonic() - started:.0f} s")
    assert (root / ".venv" / "bin" / "hybrid-operator").exists()
    assert not (root / ".venv" / "bin" / "hybrid-operator").samefile(SCAFFOLDING)
    return root


@pytest.fixture(scope="module")
def make_run(project: Path, env: dict[str, str]) -> Iterator[MakeRun]:
    run = MakeRun(project, f"--port {free_port()}", env)
    try:
        run.printed(r"metrics: http://127\.0\.0\.1:\d+/metrics")
        yield run
    finally:
        run.kill()


def kubectl(run: MakeRun, env: dict[str, str], *args: str,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**env, "KUBECONFIG": str(run.project / ".hybrid" / "kubeconfig")}
    return subprocess.run([find_binary("kubectl"), *args], env=environ, capture_output=True, text=True,
                          timeout=60, check=False, input=stdin)


def get(run: MakeRun, env: dict[str, str], *args: str) -> Any:
    result = kubectl(run, env, "get", *args, "-o", "json")
    return json.loads(result.stdout) if result.returncode == 0 else None


def condition(obj: Any, kind: str) -> dict[str, Any]:
    found = [c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c.get("type") == kind]
    return found[0] if found else {}


def shop(name: str, **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "shop.example.com/v1alpha1", "kind": "Shop", "metadata": {"name": name},
                           "spec": spec})


def greeting(run: MakeRun, env: dict[str, str], name: str) -> str | None:
    found = get(run, env, "configmap", f"{name}-greeting")
    return found["data"]["greeting"] if found else None


def test_the_scaffolded_project_installs_hybrid_operator_from_this_checkout(project: Path) -> None:
    requirements = (project / "requirements.txt").read_text()
    checkout = SCAFFOLDING.resolve().parents[2]
    assert f"hybrid-operator @ {checkout.as_uri()}" in requirements
    assert f"hybrid-operator @ {checkout.as_uri()}" in (project / "README.md").read_text()


def test_apply_a_resource_see_it_succeed_and_change_it(make_run: MakeRun, env: dict[str, str]) -> None:
    # the sample `make run` created can be applied again without a warning (it carries kubectl's annotation)
    wait_for(lambda: condition(get(make_run, env, "shop", "shop-sample"), "Successful").get("status") == "True",
             "the sample to succeed", timeout=240)
    again = kubectl(make_run, env, "apply", "-f", str(make_run.project / "config" / "samples"))
    assert again.returncode == 0 and "Warning" not in again.stderr, again.stderr
    assert kubectl(make_run, env, "apply", "-f", "-", stdin=shop("corner", greeting="Hi")).returncode == 0
    wait_for(lambda: condition(get(make_run, env, "shop", "corner"), "Successful").get("status") == "True",
             "the new Shop to succeed", timeout=180)
    assert greeting(make_run, env, "corner") == "Hi"
    assert kubectl(make_run, env, "apply", "-f", "-", stdin=shop("corner", greeting="Hello again")).returncode == 0
    wait_for(lambda: greeting(make_run, env, "corner") == "Hello again", "the ConfigMap to follow the change",
             timeout=180)


def test_a_role_edit_takes_effect_at_the_next_event(make_run: MakeRun, env: dict[str, str]) -> None:
    tasks = make_run.project / "roles" / "shop" / "tasks" / "main.yml"
    tasks.write_text(tasks.read_text().replace('greeting: "{{ greeting }}"', 'greeting: "{{ greeting | upper }}"'))
    assert kubectl(make_run, env, "apply", "-f", "-", stdin=shop("corner", greeting="edited")).returncode == 0
    wait_for(lambda: greeting(make_run, env, "corner") == "EDITED", "the edited role to run", timeout=180)


def test_make_molecule_passes_beside_make_run(make_run: MakeRun, project: Path, env: dict[str, str]) -> None:
    result = subprocess.run(["make", "--no-print-directory", "molecule"], cwd=project, env=env, capture_output=True,
                            text=True, timeout=900, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert re.search(r"(?m)^shop\s+: actions=7\s+successful=7 .* failed=0", output), output[-3000:]
    assert make_run.process.poll() is None


def test_sigint_during_a_reconcile_stops_make_run_cleanly(make_run: MakeRun, env: dict[str, str]) -> None:
    assert kubectl(make_run, env, "apply", "-f", "-", stdin=shop("corner", greeting="last", delay=6)).returncode == 0
    wait_for(lambda: condition(get(make_run, env, "shop", "corner"), "Running").get("reason") == "Running",
             "the reconcile to start", timeout=120, interval=0.2)
    assert make_run.interrupt() == 0, make_run.output()[-4000:]  # Ctrl-C on its terminal
    assert "Interrupt" not in make_run.output()
    output = make_run.output()
    assert "Traceback" not in output, output[-4000:]
    assert "operator stopped" in output
    # the run in progress was let finish (graceful shutdown) before the operator and the cluster stopped
    stopping = output.index("waiting for running reconciles")
    finished = [line for line in output[stopping:].splitlines() if "run finished" in line and "cr=corner" in line]
    assert finished and "failed=0" in finished[0], output[stopping:][-3000:]
