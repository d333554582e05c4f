"""The operator as a process (`hybrid-operator run`) next to an embedded cluster, for e2e tests."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cluster import Cluster


class OperatorProcess:
    """A running `hybrid-operator run` process and its log."""

    def __init__(self, cluster: Cluster, watches: Path, workdir: Path, *args: str) -> None:
        self.cluster = cluster
        self.watches = watches
        self.artifacts = workdir / "runner"
        self.log_path = workdir / "operator.log"
        workdir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "hybrid_operator.cli", "--log-format", "json", "run",
                   "--watches-file", str(watches), "--kubeconfig", str(cluster.kubeconfig),
                   "--artifacts-dir", str(self.artifacts), "--ansible-verbosity", "0",
                   # any free port (the log says which); a test may pass its own
                   "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0", *args]
        env = cluster.env()
        env["ANSIBLE_LOCAL_TEMP"] = str(workdir / "ansible-tmp")
        # the operator's own objects (its Lease, its dependents ConfigMap) go to the test's namespace, as
        # they go to a Pod's: tests sharing a server do not share them
        env.setdefault("POD_NAMESPACE", cluster.namespace)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            cwd=watches.parent)

    def log_records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log_path.read_text().splitlines():
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return records

    def runs(self, name: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.log_records() if r.get("msg") == "run finished" and r.get("cr") == name
                and (kind is None or r.get("kind") == kind)]

    def endpoint(self, what: str) -> str:
        """``http://host:port`` of the ``metrics``/``health``/``user-metrics`` server, from the log."""
        for record in self.log_records():
            if record.get("msg") == "serving" and record.get("endpoint") == what:
                return "http://" + str(record["address"]).split(",")[0]
        return ""

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                return self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait(timeout=10)
        return int(self.process.returncode)


def wait_for(probe: Callable[[], Any], what: str, timeout: float = 90.0, interval: float = 0.5) -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (subprocess.CalledProcessError, json.JSONDecodeError, KeyError) as exc:
            last = exc
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return dict(entry)
    return None


def get_or_none(cluster: Cluster, *args: str) -> dict[str, Any] | None:
    result = cluster.kubectl("get", *args, "-o", "json", check=False)
    if result.returncode != 0:
        return None
    return dict(json.loads(result.stdout))




def apply(cluster: Cluster, document: dict[str, Any]) -> None:
    """``kubectl apply`` one object given as a dict."""
    cluster.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(document))


def open_crd(kind: str, group: str = "e2e.hybrid.dev") -> dict[str, Any]:
    """A namespaced v1 CRD with a status subresource and open spec/status schemas."""
    plural = kind.lower() + "s"
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": open_object, "status": open_object}}}}]},
    }


def install_open_crd(cluster: Cluster, kind: str, group: str = "e2e.hybrid.dev") -> None:
    """:func:`open_crd` applied, and waited for until the API server serves it."""
    apply(cluster, open_crd(kind, group))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{kind.lower()}s.{group}")


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children of all its threads, recursively), as /proc lists them now."""
    found: list[int] = []
    pending = [root]
    while pending:
        pid = pending.pop()
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                children = [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            pending += children
    return found
