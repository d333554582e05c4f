"""The artifacts directory is no other local user's business (docs/security.md, "Secrets at rest").

Issue 28 item 5: the default ``/tmp/hybrid-operator/runner`` was shared by every operator and every
user of the machine, and holds the kubeconfig helm uses. Each attack runs a real ``hybrid-operator
run`` against an embedded cluster:

(a) another user makes the directory first, open to all (0777), then swaps the kubeconfig for one
    with an exec plugin: the operator must refuse the directory, so helm never runs the plugin;
(b) another user holds the lock file of a directory: the operator must not hang at startup;
(c) the directory is a symbolic link into the victim's files, or a link is planted inside it: the
    startup sweep must delete nothing of the victim's;
(d) two operators for two clusters, same user, default directory: each one's helm must install into
    its own cluster (it installed a release into the other's).

"Another user" is uid :data:`OTHER_UID` when the tests run as root (files are chowned to it);
otherwise the variants that need a second user are skipped and the ones where the directory is open
to everyone (mode 0777) stand for them.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.attacker import SECURITY_GROUP, Operator, StartOperator, write_project
from support.cluster import Cluster
from support.operator import apply, condition, get_or_none, install_open_crd, wait_for

pytestmark = [pytest.mark.security]

KIND = "Pin"
OTHER_UID = 54321
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="making a file another user's (chown) needs root")
CHART = {
    "charts/pin/Chart.yaml": "apiVersion: v2\nname: pin\nversion: 0.1.0\n",
    "charts/pin/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name | quote }}\n"
                                    "data:\n  where: {{ .Values.where | default \"\" | quote }}\n",
}
WATCHES = f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: {KIND}
  chart: charts/pin
"""


#: no runtime or cache directory of the machine's: the default goes under the HOME the test gives
NO_XDG = {"XDG_RUNTIME_DIR": "", "XDG_CACHE_HOME": ""}


def watching(operator: Operator) -> bool:
    """Started and watching its kinds, or gone (then the caller looks at how it ended)."""
    return operator.process.poll() is not None or \
        any(record.get("msg") == "watching started" for record in operator.log_records())


def exit_code(operator: Operator) -> int | None:
    """How the operator ended, after up to 30 s; None when it still runs."""
    try:
        return operator.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        return None


def install_kind(cluster: Cluster) -> None:
    install_open_crd(cluster, KIND, SECURITY_GROUP)


def pin(name: str, namespace: str, where: str = "") -> dict[str, Any]:
    return {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": KIND, "metadata": {"name": name, "namespace": namespace},
            "spec": {"where": where}}


def deployed(cluster: Cluster, name: str, namespace: str) -> bool:
    obj = get_or_none(cluster, f"{KIND.lower()}s.{SECURITY_GROUP}", name, "-n", namespace)
    found = condition(obj or {}, "Deployed")
    return bool(found and found["status"] == "True")


def releases(cluster: Cluster) -> set[str]:
    return {row["name"] for row in json.loads(cluster.helm("list", "-A", "-o", "json").stdout)}


def left_by(owner: str, path: Path, mode: int) -> None:
    """``path`` with ``mode`` and, for ``owner`` "another user", their uid (root only: see the module)."""
    path.chmod(mode)
    if owner == "another user":
        os.chown(path, OTHER_UID, OTHER_UID, follow_symlinks=False)


def exec_plugin_kubeconfig(cluster: Cluster, marker: Path) -> str:
    """The cluster's kubeconfig, its token handed out by an exec plugin that first creates ``marker``."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    credential = json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                             "status": {"token": cluster.token}})
    config["users"][0]["user"] = {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/sh", "interactiveMode": "Never",
        "args": ["-c", f"touch {marker}; echo '{credential}'"]}}
    return yaml.safe_dump(config)


# -- (a) another user's directory ------------------------------------------------------------------


@pytest.mark.parametrize("owner", [pytest.param("another user", marks=needs_root), "open to everyone"])
def test_a_directory_others_can_write_is_refused_before_helm_runs(
        owner: str, shared_cluster: Cluster, tmp_path: Path, start_operator: StartOperator) -> None:
    install_kind(shared_cluster)
    watches = write_project(tmp_path / "project", {"watches.yaml": WATCHES, **CHART})
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    taken = shared / "hybrid-operator"
    runner = taken / "runner"
    runner.mkdir(parents=True)
    left_by(owner, taken, 0o777)
    left_by(owner, runner, 0o777)
    marker = tmp_path / f"exec-plugin-ran-{uuid.uuid4().hex[:6]}"
    operator = start_operator(shared_cluster, watches, runner, NO_XDG)
    wait_for(lambda: operator.process.poll() is not None or (runner / "kubeconfig").exists(),
             "the operator to refuse the directory or to write its kubeconfig there", timeout=60)
    if operator.process.poll() is None:  # it took the directory: the other user swaps the kubeconfig
        swapped = runner / f".swap-{uuid.uuid4().hex[:6]}"
        swapped.write_text(exec_plugin_kubeconfig(shared_cluster, marker))
        os.replace(swapped, runner / "kubeconfig")
        name = f"swapped-{uuid.uuid4().hex[:6]}"
        apply(shared_cluster, pin(name, shared_cluster.namespace))
        wait_for(lambda: marker.exists() or deployed(shared_cluster, name, shared_cluster.namespace),
                 "helm to run", timeout=60)
    assert not marker.exists(), "helm ran the exec plugin another user put in the operator's kubeconfig"
    assert exit_code(operator) == 2
    why = "belongs to uid" if owner == "another user" else "is writable by other users"
    assert why in operator.text() and str(taken) in operator.text(), operator.text()


# -- (b) another user's lock -----------------------------------------------------------------------


@pytest.mark.parametrize("lock", [pytest.param("another user's lock file", marks=needs_root),
                                  "a directory open to everyone"])
def test_a_held_lock_does_not_stop_the_operator(lock: str, shared_cluster: Cluster, tmp_path: Path,
                                                start_operator: StartOperator) -> None:
    install_kind(shared_cluster)
    watches = write_project(tmp_path / "project", {"watches.yaml": WATCHES, **CHART})
    runner = tmp_path / "runner"
    runner.mkdir(mode=0o700)
    held = runner / ".operator.lock"
    held.touch()
    if lock == "another user's lock file":
        left_by("another user", held, 0o666)
    else:
        runner.chmod(0o777)
    holder = os.open(held, os.O_RDWR)  # the other user opened it while they could, and never lets go
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        operator = start_operator(shared_cluster, watches, runner, NO_XDG)
        name = f"locked-{uuid.uuid4().hex[:4]}"
        if lock == "another user's lock file":
            apply(shared_cluster, pin(name, shared_cluster.namespace))
            assert wait_for(lambda: deployed(shared_cluster, name, shared_cluster.namespace) or
                            operator.process.poll() is not None, "the operator to deploy despite the lock",
                            timeout=60)
            assert operator.process.poll() is None, operator.text()
            assert deployed(shared_cluster, name, shared_cluster.namespace)
        else:
            deadline = time.monotonic() + 30
            while operator.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert operator.process.poll() == 2, f"the operator still waits for the lock:\n{operator.text()}"
            assert "is writable by other users" in operator.text()
    finally:
        os.close(holder)


# -- (c) symbolic links ----------------------------------------------------------------------------


def victim(root: Path) -> dict[Path, bytes]:
    """The victim's files (``~/tmp/*`` in the issue), with their content."""
    files = {root / "tmp" / "thesis.txt": b"four years", root / "run-credentials" / "keys.txt": b"ssh keys",
             root / "kubeconfigs" / "notes.txt": b"notes", root / "notes.txt": b"more notes"}
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return files


def intact(files: dict[Path, bytes]) -> list[str]:
    return [str(path) for path, content in files.items() if not path.is_file() or path.read_bytes() != content]


@pytest.mark.parametrize("owner", [pytest.param("another user", marks=needs_root), "open to everyone"])
def test_an_artifacts_directory_that_is_a_link_is_refused(owner: str, shared_cluster: Cluster, tmp_path: Path,
                                                          start_operator: StartOperator) -> None:
    install_kind(shared_cluster)
    watches = write_project(tmp_path / "project", {"watches.yaml": WATCHES, **CHART})
    files = victim(tmp_path / "home")
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    taken = shared / "hybrid-operator"
    taken.mkdir()
    (taken / "runner").symlink_to(tmp_path / "home")
    left_by(owner, taken, 0o777)
    if owner == "another user":
        os.chown(taken / "runner", OTHER_UID, OTHER_UID, follow_symlinks=False)
    operator = start_operator(shared_cluster, watches, taken / "runner", NO_XDG)
    wait_for(lambda: operator.process.poll() is not None or watching(operator), "the operator to start or stop",
             timeout=60)
    time.sleep(2)  # a start that went on had its sweep by now
    assert intact(files) == [], "the startup sweep deleted the victim's files through the link"
    assert exit_code(operator) == 2, operator.text()


def test_links_planted_inside_the_directory_are_never_followed(shared_cluster: Cluster, tmp_path: Path,
                                                                start_operator: StartOperator) -> None:
    install_kind(shared_cluster)
    watches = write_project(tmp_path / "project", {"watches.yaml": WATCHES, **CHART})
    files = victim(tmp_path / "home")
    runner = tmp_path / "runner"
    runner.mkdir(mode=0o700)
    for name in ("run-credentials", "tmp", "kubeconfigs"):
        (runner / name).symlink_to(tmp_path / "home" / name)
    operator = start_operator(shared_cluster, watches, runner, NO_XDG)
    name = f"planted-{uuid.uuid4().hex[:4]}"
    apply(shared_cluster, pin(name, shared_cluster.namespace))
    wait_for(lambda: deployed(shared_cluster, name, shared_cluster.namespace) or operator.process.poll() is not None,
             "the release to be deployed", timeout=90)
    assert intact(files) == [], "the startup sweep deleted the victim's files through a planted link"
    assert not (runner / "run-credentials").is_symlink() and not (runner / "tmp").is_symlink()
    assert list((tmp_path / "home" / "tmp").iterdir()) == [tmp_path / "home" / "tmp" / "thesis.txt"], \
        "the operator wrote its scratch files through the link"


# -- (d) two operators, two clusters, one user -----------------------------------------------------


@pytest.fixture
def two_clusters(tmp_path: Path) -> Iterator[tuple[Cluster, Cluster]]:
    first, second = Cluster(tmp_path / "cluster-a"), Cluster(tmp_path / "cluster-b")
    first.start()
    try:
        second.start()
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def test_two_operators_of_one_user_keep_to_their_own_clusters(two_clusters: tuple[Cluster, Cluster],
                                                              tmp_path: Path, start_operator: StartOperator) -> None:
    home = tmp_path / "home"  # one user: one HOME for both operators, no --artifacts-dir
    home.mkdir()
    watches = write_project(tmp_path / "project", {"watches.yaml": WATCHES, **CHART})
    operators = []
    for cluster, label in zip(two_clusters, "ab", strict=True):
        install_kind(cluster)
        env = {"HOME": str(home), "HELM_CACHE_HOME": str(home / ".cache" / "helm"),
               "HELM_CONFIG_HOME": str(home / ".config" / "helm"), "HELM_DATA_HOME": str(home / ".local" / "helm")}
        operator = start_operator(cluster, watches, None, {**NO_XDG, **env})
        operators.append(operator)
        wait_for(lambda op=operator: watching(op), f"operator {label} to start", timeout=60)  # type: ignore[misc]
        assert operator.process.poll() is None, operator.text()
    for cluster, label in zip(two_clusters, "ab", strict=True):
        apply(cluster, pin(f"release-{label}", "default", label))
    for cluster, label in zip(two_clusters, "ab", strict=True):
        wait_for(lambda c=cluster, n=f"release-{label}": deployed(c, n, "default") or  # type: ignore[misc]
                 n in releases(c) or any(n in releases(o) for o in two_clusters),
                 f"release-{label} to be installed somewhere", timeout=90)
    first, second = two_clusters
    assert "release-a" not in releases(second), "operator a's helm installed its release into cluster b"
    assert "release-b" not in releases(first), "operator b's helm installed its release into cluster a"
    wait_for(lambda: deployed(first, "release-a", "default") and deployed(second, "release-b", "default"),
             "each release deployed in its own cluster")

    directories = []
    for operator in operators:
        [directory] = [Path(r["directory"]) for r in operator.log_records() if r.get("msg") == "artifacts directory"]
        directories.append(directory)
        info = directory.lstat()
        assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
        assert info.st_uid == os.geteuid()
        assert directory.parent == home / ".cache" / "hybrid-operator"
    assert directories[0] != directories[1], "two operators share one artifacts directory"
    for operator, directory in zip(operators, directories, strict=True):
        operator.stop()
        assert operator.process.returncode == 0, operator.text()
        assert not directory.exists(), "a per-process directory outlived its process"

