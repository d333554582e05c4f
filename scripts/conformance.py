"""``make conformance PATH=<checkout>``: an Operator SDK Ansible test operator, run on hybrid-operator.

The SDK's own test operators (memcached-molecule-operator, advanced-molecule-operator) are our
conformance suite: their molecule ``default`` scenario deploys them to a kind cluster and then runs
``molecule/default/tasks/*_test.yml``. This does the same against hybrid-operator, with nothing of
theirs copied into this repository and none of their code built:

1. the checkout's image is laid out as its Dockerfile describes (``conformance_checkout.Image``):
   in a private mount namespace when the system allows one, its HOME is ``/opt/ansible`` as in the
   SDK's image, and ``/tmp`` is the run's own (as a container's);
2. an embedded cluster starts; what molecule's converge applies (``kustomize build
   config/testing``: namespace, CRDs, RBAC) is applied, except the manager Deployment;
3. ``hybrid-operator run`` starts in place of that Deployment's container, with its args and env
   (translated where a Pod's differ: see the notes printed at the end);
4. the samples are applied, and each test file is replayed with ``ansible-playbook`` and the
   variables molecule gives it (``namespace``, ``samples_dir``, ``config_dir``, ``molecule_yml``...),
   one file at a time: PASS or FAIL per file. Files that need a running container are SKIPped
   (``--include-container-tests`` runs them anyway).

Logs: ``.hybrid/conformance/<checkout name>/`` (the operator's, the cluster's, one per test file).
Exit code 0 when no file failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import conformance_checkout as checkout_files
from conformance_checkout import IMAGE_HOME, Image, Notes

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NAMESPACED = "HYBRID_CONFORMANCE_NAMESPACED"
#: test files that cannot pass without a running container, and why
CONTAINER_TESTS = {
    "subresourcestest_test.yml": "execs into a Pod (k8s_exec) and reads its log (k8s_log): no container runs "
                                 "on the embedded cluster",
}
#: what a replayed metrics scrape presents as its bearer token (the test reads the Pod's service account token)
TOKEN_VARIABLE = "HYBRID_CONFORMANCE_TOKEN"


@dataclass
class Result:
    name: str
    status: str
    seconds: float = 0.0
    detail: str = ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def private_mounts(work: Path, notes: Notes) -> bool:
    """Give this process (already in its own mount namespace) its own /opt/ansible and /tmp."""
    def mount(*args: str) -> bool:
        return subprocess.run(["mount", *args], capture_output=True, check=False).returncode == 0

    if IMAGE_HOME.exists():
        ok = mount("-t", "tmpfs", "tmpfs", str(IMAGE_HOME))
    else:
        upper, scratch = work / "opt-upper", work / "opt-work"
        upper.mkdir(parents=True, exist_ok=True)
        scratch.mkdir(parents=True, exist_ok=True)
        ok = mount("-t", "overlay", "overlay", "-o", f"lowerdir=/opt,upperdir={upper},workdir={scratch}", "/opt")
        ok = ok and subprocess.run(["mkdir", "-p", str(IMAGE_HOME)], check=False).returncode == 0
    if not ok:
        notes.add("could not mount a private /opt/ansible: files the image has there are elsewhere")
        return False
    mount("-t", "tmpfs", "tmpfs", "/tmp")
    notes.add("ran in a private mount namespace: /opt/ansible is the image's HOME, /tmp the run's own")
    return True


def reexec_namespaced(argv: list[str]) -> None:
    """Run again in a private mount namespace (root, or user namespaces), so /opt/ansible can exist."""
    if os.environ.get(NAMESPACED) or shutil.which("unshare") is None or sys.platform != "linux":
        return
    flags = ["--mount", "--propagation", "private"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    probe = subprocess.run(["unshare", *flags, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return
    env = {**os.environ, NAMESPACED: "1"}
    os.execvpe("unshare", ["unshare", *flags, sys.executable, str(Path(__file__).resolve()), *argv], env)


class Cluster:
    """``hybrid-operator cluster --in-memory`` on a free port."""

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.kubeconfig = work / "kubeconfig"
        self.log = (work / "cluster.log").open("w")
        self.process = subprocess.Popen(
            [str(BIN / "hybrid-operator"), "cluster", "--in-memory", "--port", str(self.port),
             "--kubeconfig", str(self.kubeconfig)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while not self.kubeconfig.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the embedded cluster did not start; see {work / 'cluster.log'}")
            time.sleep(0.2)

    def token(self) -> str:
        """The kubeconfig's bearer token: the credentials the operator runs with, as a Pod's service account."""
        config = yaml.safe_load(self.kubeconfig.read_text()) or {}
        return str(((config.get("users") or [{}])[0].get("user") or {}).get("token", ""))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def apply_all(kubeconfig: Path, documents: list[dict[str, Any]], namespace: str) -> None:
    """Server-side apply the documents: CRDs first (and wait until they are served), then the rest."""
    from hybrid_operator.kube.client import ClusterClient

    client = ClusterClient(kubeconfig, user_agent="hybrid-operator-conformance")
    crds = [d for d in documents if d.get("kind") == "CustomResourceDefinition"]
    for doc in crds:
        client.apply_manifest(doc, "conformance", namespace=namespace)
    for doc in crds:
        group, names = doc["spec"]["group"], doc["spec"]["names"]
        version = doc["spec"]["versions"][0]["name"]
        _eventually(lambda g=group, v=version, k=names["kind"]: client.resolve(g, v, k),
                    f"CRD {doc['metadata']['name']}")
    for doc in documents:
        if doc.get("kind") != "CustomResourceDefinition":
            _eventually(lambda d=doc: client.apply_manifest(d, "conformance", namespace=namespace),
                        f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}")


def _eventually(action: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except Exception as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"could not apply {what}: {exc}") from exc
            time.sleep(0.5)


def samples(checkout: Path) -> list[dict[str, Any]]:
    """config/samples: the files its kustomization lists (all YAML files when it has none)."""
    folder = checkout / "config" / "samples"
    listed = folder / "kustomization.yaml"
    names = (yaml.safe_load(listed.read_text()) or {}).get("resources") if listed.is_file() else None
    paths = [folder / n for n in names] if names else sorted(p for p in folder.glob("*.yaml") if p != listed)
    return [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]


class Operator:
    """``hybrid-operator run`` where the image's entrypoint would run, with the container's args and env."""

    def __init__(self, image: Image, manager: checkout_files.Manager, cluster: Cluster, work: Path,
                 health_port: int) -> None:
        self.health_port = health_port
        self.log_path = work / "operator.log"
        env = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(IMAGE_HOME),
               "LANG": os.environ.get("LANG", "C.UTF-8"), **image.env, **manager.env,
               "KUBECONFIG": str(cluster.kubeconfig), "POD_NAMESPACE": manager.namespace}
        command = [str(BIN / "hybrid-operator"), "run", *manager.args, "--artifacts-dir", str(work / "runner")]
        self.command = command
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(command, cwd=image.home, env=env, stdout=log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"hybrid-operator run exited ({self.process.returncode}); see {self.log_path}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1)
        raise SystemExit(f"hybrid-operator run did not become ready in {timeout:.0f} s; see {self.log_path}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def molecule_inventory(checkout: Path, namespace: str, work: Path) -> Path:
    """The variables molecule gives the verify play: molecule.yml's group_vars and host_vars (with the
    environment substituted as molecule does), and ``molecule_yml``."""
    config = checkout_files.molecule_config(checkout)
    group, host = checkout_files.molecule_variables(config)
    host = {"ansible_python_interpreter": "{{ ansible_playbook_python }}", **host, "ansible_connection": "local"}
    variables = {**group, "namespace": namespace, "molecule_yml": {**config, "scenario": {"name": "default"}}}
    inventory = {"all": {"hosts": {"localhost": host}, "vars": variables}}
    path = work / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def verify_vars(checkout: Path) -> dict[str, Any]:
    """The ``vars`` of molecule's verify play (``ctrl_label``...): the included test files may use them."""
    path = checkout / "molecule" / "default" / "verify.yml"
    plays = yaml.safe_load(path.read_text()) if path.is_file() else None
    first = plays[0] if isinstance(plays, list) and plays and isinstance(plays[0], dict) else {}
    found = first.get("vars")
    return dict(found) if isinstance(found, dict) else {}


def replay(test: Path, inventory: Path, play_vars: dict[str, Any], cluster: Cluster, work: Path,
           timeout: float) -> Result:
    """One test file, included by a verify play as molecule's verify.yml includes it. The play is written
    next to the scenario's copy (``test``'s grandparent), as verify.yml is: templates/ and files/ of the
    scenario are found as there."""
    play = [{"name": f"Verify {test.name}", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "collections": ["kubernetes.core"], "vars": play_vars,
             "tasks": [{"ansible.builtin.include_tasks": f"tasks/{test.name}"}]}]
    playbook = test.parent.parent / f"hybrid-verify-{test.stem}.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    home = work / "verify-home"
    home.mkdir(exist_ok=True)
    env = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home), "LANG": "C.UTF-8",
           "K8S_AUTH_KUBECONFIG": str(cluster.kubeconfig), "KUBECONFIG": str(cluster.kubeconfig),
           TOKEN_VARIABLE: cluster.token(),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "False", "ANSIBLE_FORCE_COLOR": "0"}
    log = work / "tests" / f"{test.stem}.log"
    log.parent.mkdir(exist_ok=True)
    started = time.monotonic()
    with log.open("w") as handle:
        try:
            done = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)], env=env,
                                  stdout=handle, stderr=subprocess.STDOUT, timeout=timeout, check=False)
            code = done.returncode
        except subprocess.TimeoutExpired:
            code = -1
    seconds = time.monotonic() - started
    if code == 0:
        return Result(test.name, "PASS", seconds)
    return Result(test.name, "FAIL", seconds, _failure(log.read_text(), code))


def _failure(output: str, code: int) -> str:
    """The last task the file ran and why it failed (or that the file's time ran out in it)."""
    lines = [line for line in output.splitlines() if line.startswith(("fatal:", "TASK [", "failed:"))]
    tasks = [line for line in lines if line.startswith("TASK [")]
    fatal = [line for line in lines if not line.startswith("TASK [")]
    where = tasks[-1].strip("* ") if tasks else ""
    if code == -1:
        return f"timed out in {where}" if where else "timed out"
    return f"{where} {fatal[-1][:300] if fatal else f'exit {code}'}".strip()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="make conformance PATH=<checkout>", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="a checkout of an SDK Ansible test operator")
    parser.add_argument("--namespace", default=None, help="molecule's namespace (default: TEST_OPERATOR_NAMESPACE, "
                                                          "else the scenario's default, osdk-test)")
    parser.add_argument("--only", action="append", default=[], help="replay only this test file (repeatable)")
    parser.add_argument("--include-container-tests", action="store_true",
                        help=f"also replay {', '.join(CONTAINER_TESTS)}")
    parser.add_argument("--test-timeout", type=float, default=900, help="seconds per test file (default 900)")
    parser.add_argument("--no-samples", action="store_true", help="do not apply config/samples first")
    args = parser.parse_args(argv)
    checkout = args.checkout.resolve()
    if not (checkout / "watches.yaml").is_file() or not (checkout / "molecule" / "default" / "tasks").is_dir():
        parser.error(f"{checkout} has no watches.yaml or molecule/default/tasks/: not an SDK test operator")
    reexec_namespaced(argv)
    return run(args, checkout)


def run(args: argparse.Namespace, checkout: Path) -> int:
    work = REPO / ".hybrid" / "conformance" / checkout.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    notes = Notes()
    mounted = os.environ.get(NAMESPACED) == "1" and private_mounts(work, notes)
    home = IMAGE_HOME if mounted else Path(tempfile.mkdtemp(prefix="image-home-", dir=work))
    if not mounted:
        notes.add(f"no private mount namespace: the image's HOME is {home}, not /opt/ansible (files the "
                  "checkout hard-codes under /opt/ansible are not found)")
    namespace = args.namespace or checkout_files.molecule_namespace(checkout)
    image = Image(checkout, home, work / "image-root", notes)
    image.build(checkout / "Dockerfile")
    documents = checkout_files.render_overlay(checkout, notes)
    manager, metrics_url, health_port = translate_manager(checkout, documents, namespace, notes)
    cluster = Cluster(work)
    operator = None
    results: list[Result] = []
    try:
        apply_all(cluster.kubeconfig, [d for d in documents if not checkout_files.is_manager(d)], namespace)
        operator = Operator(image, manager, cluster, work, health_port)
        operator.wait_ready()
        if not args.no_samples:
            apply_all(cluster.kubeconfig, samples(checkout), namespace)
        inventory = molecule_inventory(checkout, namespace, work)
        results = replay_all(args, checkout, inventory, cluster, work, metrics_url, notes)
    finally:
        if operator is not None:
            operator.stop()
        cluster.stop()
    report(checkout, results, notes, work, operator.command if operator else [])
    return 1 if any(r.status == "FAIL" for r in results) else 0


def translate_manager(checkout: Path, documents: list[dict[str, Any]], namespace: str,
                      notes: Notes) -> tuple[checkout_files.Manager, str, int]:
    from hybrid_operator.cli.commands import build_parser

    container = checkout_files.manager_container(documents)
    raw = [*checkout_files.entrypoint_args(checkout / "Dockerfile"), *(container.get("args") or [])]
    known = run_flags(build_parser())
    ports = {flag: free_port() for flag in checkout_files.ADDRESS_FLAGS}
    arguments = checkout_files.translate_args(raw, known, ports, notes)
    health_flag = "--health-probe-bind-address"
    if not any(a.startswith(health_flag) for a in arguments):
        arguments.append(f"{health_flag}=127.0.0.1:{ports[health_flag]}")
    if not any(a.startswith("--metrics-bind-address") for a in arguments):
        arguments.append(f"--metrics-bind-address=127.0.0.1:{ports['--metrics-bind-address']}")
    scheme = "https" if "--metrics-secure" in arguments else "http"
    metrics_url = f"{scheme}://127.0.0.1:{ports['--metrics-bind-address']}/metrics"
    env = checkout_files.translate_env(container, namespace, notes)
    return checkout_files.Manager(arguments, env, namespace), metrics_url, ports[health_flag]


def run_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every option ``hybrid-operator run`` accepts."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {option for sub in action.choices["run"]._actions for option in sub.option_strings}
    return set()


def replay_all(args: argparse.Namespace, checkout: Path, inventory: Path, cluster: Cluster, work: Path,
               metrics_url: str, notes: Notes) -> list[Result]:
    results = []
    scenario = work / "scenario"  # a copy of molecule/default: the replayed plays are written into it
    shutil.copytree(checkout / "molecule" / "default", scenario, dirs_exist_ok=True)
    for test in sorted((checkout / "molecule" / "default" / "tasks").glob("*_test.yml")):
        if args.only and test.name not in args.only:
            continue
        if test.name in CONTAINER_TESTS and not args.include_container_tests:
            results.append(Result(test.name, "SKIP", detail=CONTAINER_TESTS[test.name]))
            continue
        included = checkout_files.replay_tasks(test, metrics_url, TOKEN_VARIABLE, scenario / "tasks", notes)
        result = replay(included, inventory, verify_vars(checkout), cluster, work, args.test_timeout)
        result.name = test.name
        print(f"{result.status:4}  {test.name}  ({result.seconds:.0f} s) {result.detail}", flush=True)
        results.append(result)
    return results


def report(checkout: Path, results: list[Result], notes: Notes, work: Path, command: list[str]) -> None:
    print(f"\nconformance of {checkout.name} on hybrid-operator")
    width = max((len(r.name) for r in results), default=10)
    for result in results:
        print(f"  {result.status:4}  {result.name:<{width}}  {result.seconds:6.0f} s  {result.detail}")
    counts = {status: sum(r.status == status for r in results) for status in ("PASS", "FAIL", "SKIP")}
    print("  " + ", ".join(f"{n} {status}" for status, n in counts.items()))
    print(f"\noperator: {' '.join(command)}")
    print("translation notes:")
    for line in notes.lines:
        print(f"  - {line}")
    print(f"logs: {work} (operator.log, cluster.log, tests/)")
    (work / "results.json").write_text(json.dumps([r.__dict__ for r in results], indent=2))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
