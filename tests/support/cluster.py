"""Helpers shared by the integration and e2e tests: a cluster process, raw HTTP access."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_binary(name: str) -> str:
    venv_bin = Path(sys.executable).parent / name
    if venv_bin.exists():
        return str(venv_bin)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: run `make setup` (it installs helm and kubectl into .venv/bin)")
    return found


class Cluster:
    """A running `hybrid-operator cluster` process and the clients pointed at it.

    :meth:`view` gives the same server seen from one namespace (its own HOME and kubeconfig, whose
    context names the namespace): that is how tests share one server (see tests/conftest.py).
    """

    def __init__(self, workdir: Path, port: int | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.data_dir = workdir / "data"
        self.kubeconfig = workdir / "kubeconfig"
        self.home = workdir / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "cluster.log"
        #: where kubectl and helm put what names no namespace (the kubeconfig context's namespace)
        self.namespace = "default"
        #: a view of a server started elsewhere: it cannot be stopped or restarted from here
        self.shared = False

    def view(self, workdir: Path, namespace: str) -> Cluster:
        """This server seen from ``namespace``: kubectl and helm default to it; stop/start are refused."""
        seen = Cluster(workdir, port=self.port)
        seen.data_dir, seen.log_path = self.data_dir, self.log_path
        seen.namespace, seen.shared = namespace, True
        config = yaml.safe_load(self.kubeconfig.read_text())
        for context in config["contexts"]:
            context["context"]["namespace"] = namespace
        workdir.mkdir(parents=True, exist_ok=True)
        seen.kubeconfig.write_text(yaml.safe_dump(config))
        seen.kubeconfig.chmod(0o600)
        return seen

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        config = yaml.safe_load(self.kubeconfig.read_text())
        return str(config["users"][0]["user"]["token"])

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(HOME=str(self.home), KUBECONFIG=str(self.kubeconfig),
                   HELM_CACHE_HOME=str(self.home / ".cache" / "helm"),
                   HELM_CONFIG_HOME=str(self.home / ".config" / "helm"),
                   HELM_DATA_HOME=str(self.home / ".local" / "share" / "helm"))
        return env

    def start(self, timeout: float = 30.0) -> None:
        assert not self.shared, "a view of a shared cluster cannot be (re)started: use the own_cluster fixture"
        if self.kubeconfig.exists():
            self.kubeconfig.unlink()
        command = [sys.executable, "-m", "hybrid_operator.cli", "cluster", "--port", str(self.port),
                   "--data-dir", str(self.data_dir), "--kubeconfig", str(self.kubeconfig), *self.extra_args]
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while not self.kubeconfig.exists():
            if self.process.poll() is not None:
                pytest.fail(f"cluster exited with {self.process.returncode}:\n{self.log_path.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"cluster did not start within {timeout}s:\n{self.log_path.read_text()}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert not self.shared, "a view of a shared cluster cannot be stopped: use the own_cluster fixture"
        assert self.process is not None
        self.process.send_signal(sig)
        code = self.process.wait(timeout=20)
        self.process = None
        return code

    def run(self, binary: str, *args: str, check: bool = True, input_text: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([find_binary(binary), *args], env=self.env(), capture_output=True, text=True,
                                check=False, input=input_text, timeout=timeout, cwd=self.workdir)
        if check and result.returncode != 0:
            pytest.fail(f"{binary} {' '.join(args)} failed ({result.returncode}):\n"
                        f"stdout: {result.stdout}\nstderr: {result.stderr}")
        return result

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", *args, **kwargs)

    def helm(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run("helm", *args, **kwargs)

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)


def cluster_ssl_context(cluster: Cluster) -> Any:
    """An SSL context trusting the CA in the cluster's kubeconfig (as client-go does)."""
    import base64
    import ssl

    config = yaml.safe_load(cluster.kubeconfig.read_text())
    ca_pem = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    return ssl.create_default_context(cadata=ca_pem)


class RawResponse:
    """Status, headers and body of one raw HTTPS answer."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


def raw_request(cluster: Cluster, method: str, path: str, body: Any = None, *,
                content_type: str = "application/json", token: str | None = "",
                headers: dict[str, str] | None = None, timeout: float = 30.0) -> RawResponse:
    """One real HTTPS request to the cluster; ``token=""`` means the kubeconfig's, None means none.

    ``body`` is sent as-is when bytes/str, else JSON-encoded.
    """
    import http.client

    sent: dict[str, str] = {"Accept": "application/json", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token or cluster.token}"
    payload: bytes | None = None
    if body is not None:
        payload = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else \
            json.dumps(body).encode()
        sent["Content-Type"] = content_type
    conn = http.client.HTTPSConnection("127.0.0.1", cluster.port, context=cluster_ssl_context(cluster),
                                       timeout=timeout)
    try:
        conn.request(method, path, body=payload, headers=sent)
        response = conn.getresponse()
        return RawResponse(response.status, dict(response.getheaders()), response.read())
    finally:
        conn.close()


class RawWatch:
    """A watch stream read line by line, each line with its own deadline."""

    def __init__(self, cluster: Cluster, path: str, timeout: float = 30.0) -> None:
        import http.client

        self.conn = http.client.HTTPSConnection("127.0.0.1", cluster.port, context=cluster_ssl_context(cluster),
                                                timeout=timeout)
        self.conn.request("GET", path, headers={"Accept": "application/json",
                                                "Authorization": f"Bearer {cluster.token}"})
        self.response = self.conn.getresponse()
        self.lines: list[bytes] = []

    def next_event(self, timeout: float = 10.0) -> dict[str, Any] | None:
        """The next event, or None when the server closed the stream; fails after ``timeout``."""
        assert self.conn.sock is not None
        self.conn.sock.settimeout(timeout)
        try:
            line = self.response.readline()
        except TimeoutError:
            pytest.fail(f"no watch event within {timeout}s (got so far: {self.lines!r})")
        if not line:
            return None
        self.lines.append(line)
        assert line.endswith(b"\n"), f"watch event not newline-terminated: {line!r}"
        event: dict[str, Any] = json.loads(line)
        return event

    def silent_for(self, seconds: float) -> bool:
        """True when nothing arrives for ``seconds`` (the stream is unusable afterwards)."""
        assert self.conn.sock is not None
        self.conn.sock.settimeout(seconds)
        try:
            line = self.response.readline()
        except TimeoutError:
            return True
        if line:
            self.lines.append(line)
        return not line

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> RawWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- namespaces on a shared cluster ------------------------------------------------------------------


def namespace_names(cluster: Cluster) -> set[str]:
    answer = raw_request(cluster, "GET", "/api/v1/namespaces")
    assert answer.status == 200, answer.body
    return {str(item["metadata"]["name"]) for item in answer.json()["items"]}


def create_namespace(cluster: Cluster, name: str) -> None:
    answer = raw_request(cluster, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert answer.status == 201, f"namespace {name}: {answer.status} {answer.body!r}"


def namespaced_collections(cluster: Cluster) -> list[str]:
    """The collection path of every listable namespaced resource, with ``{namespace}`` to fill in."""
    found: list[str] = []

    def add(prefix: str) -> None:
        answer = raw_request(cluster, "GET", prefix)
        if answer.status != 200:
            return
        for resource in answer.json().get("resources", []):
            if resource.get("namespaced") and "/" not in resource["name"] and "list" in resource.get("verbs", []):
                found.append(f"{prefix}/namespaces/{{namespace}}/{resource['name']}")

    add("/api/v1")
    for group in raw_request(cluster, "GET", "/apis").json().get("groups", []):
        add(f"/apis/{group['preferredVersion']['groupVersion']}")
    return found


def drop_finalizers(cluster: Cluster, namespace: str) -> None:
    """Remove every finalizer in ``namespace``: the operators that would have handled them are gone."""
    for collection in namespaced_collections(cluster):
        path = collection.format(namespace=namespace)
        answer = raw_request(cluster, "GET", path)
        if answer.status != 200:
            continue
        for item in answer.json().get("items", []):
            if item["metadata"].get("finalizers"):
                raw_request(cluster, "PATCH", f"{path}/{item['metadata']['name']}",
                            {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")


def delete_namespaces(cluster: Cluster, names: set[str] | list[str], timeout: float = 120.0) -> None:
    """Delete ``names`` and wait until they are gone, dropping finalizers that hold them after a moment."""
    for name in names:
        answer = raw_request(cluster, "DELETE", f"/api/v1/namespaces/{name}")
        assert answer.status in (200, 202, 404, 409), f"delete namespace {name}: {answer.status} {answer.body!r}"
    deadline = time.monotonic() + timeout
    strip_at = time.monotonic() + 1.0
    while True:
        left = [name for name in names if raw_request(cluster, "GET", f"/api/v1/namespaces/{name}").status != 404]
        if not left:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"namespaces {left} were not deleted within {timeout}s")
        if time.monotonic() >= strip_at:
            for name in left:
                drop_finalizers(cluster, name)
            strip_at = time.monotonic() + 2.0
        time.sleep(0.1)


def wait_until(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Poll ``check`` every 0.2 s until it returns something truthy (returned); fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)
    return result


def open_crd(group: str, kind: str) -> dict[str, Any]:
    """A namespaced CRD (``<kind>s.<group>``, version v1) whose objects keep any field: a custom resource to list
    and watch, for tests that compare it with a built-in kind."""
    plural = f"{kind.lower()}s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    }
