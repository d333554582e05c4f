"""Helpers of the security tests (tests/security): the operator as an attacker meets it.

The operator runs as a process of its own session, so a test can ``kill -9`` it and every process
it started (by their ids), the way a node losing power would; files it leaves are searched for
secrets; kubeconfigs give the proxy's address and a run's token.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from support.cluster import Cluster
from support.operator import descendants

SECURITY_GROUP = "security.hybrid.dev"
#: the operator's environment carries this "credential"; no file the operator writes may contain it
SECRET_NAME = "MY_SECRET_TOKEN"


class Operator:
    """``hybrid-operator run`` in its own session, with extra environment variables."""

    def __init__(self, cluster: Cluster, watches: Path, workdir: Path, artifacts: Path | None,
                 env: dict[str, str] | None = None) -> None:
        """``artifacts`` None: no ``--artifacts-dir`` (the operator makes its own)."""
        self.log_path = workdir / f"operator-{uuid.uuid4().hex[:8]}.log"
        self.artifacts = artifacts
        where = ["--artifacts-dir", str(artifacts)] if artifacts is not None else []
        command = [sys.executable, "-m", "hybrid_operator.cli", "--log-format", "json", "run",
                   "--watches-file", str(watches), "--kubeconfig", str(cluster.kubeconfig), *where,
                   "--ansible-verbosity", "0",
                   "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"]
        environment = cluster.env()
        environment.pop("ANSIBLE_GATHERING", None)  # role kinds gather facts, as the SDK's do by default
        environment["ANSIBLE_LOCAL_TEMP"] = str(workdir / "ansible-tmp")
        environment.update(env or {})
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment,
                                            cwd=watches.parent, start_new_session=True)

    def log_records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return records

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def runs(self, name: str) -> list[dict[str, Any]]:
        """The ``run finished`` log records of the CR ``name``."""
        return [r for r in self.log_records() if r.get("msg") == "run finished" and r.get("cr") == name]

    def descendants(self) -> list[int]:
        """Every process this operator started, directly or not (ansible-runner's children get a session
        of their own, so a process group would miss them)."""
        return descendants(self.process.pid)

    def kill9(self) -> None:
        """SIGKILL the operator, then every process it had started (by id): no cleanup code runs."""
        doomed = self.descendants()
        self.process.kill()
        self.process.wait(timeout=30)
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        doomed = self.descendants()
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for pid in doomed:  # anything left behind by a run the shutdown cancelled
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue


StartOperator = Callable[..., Operator]


def write_project(directory: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path -> text) under ``directory``; return the watches file."""
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return directory / "watches.yaml"


def unique_marker() -> Path:
    """A path in the temporary directory that an attack would create; unique per call."""
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"hybrid-operator-pwned-{uuid.uuid4().hex}"


def kubeconfig_credentials(path: Path) -> tuple[str, str, ssl.SSLContext]:
    """(server, token, TLS context trusting its CA) of a kubeconfig."""
    document = yaml.safe_load(path.read_text())
    cluster = document["clusters"][0]["cluster"]
    ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    return cluster["server"], document["users"][0]["user"]["token"], ssl.create_default_context(cadata=ca)


def files_containing(root: Path, needle: bytes) -> list[Path]:
    """Every regular file under ``root`` whose bytes contain ``needle`` (pipes and sockets are skipped)."""
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
        except OSError:
            continue
    return found
