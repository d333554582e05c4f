"""The ownership proxy in front of a real `hybrid-operator cluster`, driven by real clients.

The proxy runs on its own event loop in a thread (the clients here are
blocking); the kubernetes Python client, kubectl, raw HTTPS and a real
``ansible-playbook`` with ``kubernetes.core.k8s`` go THROUGH it with a run
kubeconfig, and the outcome is read back directly from the cluster.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import http.client
import itertools
import json
import ssl
import subprocess
import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from hybrid_operator.ansible import ownership
from hybrid_operator.ansible.proxy import OwnerProxy, RunCredentials
from hybrid_operator.kube.connection import Connection
from support.cluster import Cluster, find_binary

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).parent / "manifests"
T = TypeVar("T")
_names = itertools.count()


class ProxyThread:
    """An OwnerProxy serving from a private event loop, callable from blocking test code."""

    def __init__(self, upstream: Connection, *, inject: bool = True) -> None:
        self.children: list[tuple[ownership.OwnerKey, ownership.ChildRef]] = []
        self.proxy = OwnerProxy(upstream, inject=inject, on_child=self._record)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self.proxy.start())

    async def _record(self, owner: ownership.OwnerKey, child: ownership.ChildRef) -> None:
        self.children.append((owner, child))

    def child_kinds(self, owner: ownership.OwnerKey) -> frozenset[ownership.ChildKind]:
        """The kinds of dependents the proxy reported for ``owner`` so far."""
        return frozenset(child.child_kind for key, child in self.children if key == owner)

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def call(self, function: Callable[..., T], *args: Any) -> T:
        future: Future[T] = Future()

        def invoke() -> None:
            future.set_result(function(*args))

        self.loop.call_soon_threadsafe(invoke)
        return future.result(timeout=30)

    def close(self) -> None:
        self.run(self.proxy.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def upstream_of(cluster: Cluster) -> Connection:
    kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
    ca = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
    return Connection(server=cluster.url, ca_data=ca, token=cluster.token)


@pytest.fixture(scope="module")
def cluster(shared_cluster: Cluster) -> Cluster:
    shared_cluster.kubectl("apply", "-f", str(MANIFESTS / "crd-database.yaml"))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd/databases.example.com")
    return shared_cluster


@pytest.fixture(scope="module")
def proxy(cluster: Cluster) -> Iterator[ProxyThread]:
    instance = ProxyThread(upstream_of(cluster))
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    name = f"proxied-{next(_names)}"  # not "proxy-N": the module's own namespace is named so
    cluster.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def owner(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """A real Database CR in the test's namespace: the owner of what the run creates."""
    cluster.kubectl("apply", "-n", namespace, "-f", str(MANIFESTS / "db-sample.yaml"))
    found: dict[str, Any] = cluster.get_json("db", "orders", "-n", namespace)
    return found


@pytest.fixture
def run(proxy: ProxyThread, owner: dict[str, Any], tmp_path: Path) -> Iterator[tuple[RunCredentials, Path]]:
    credentials = proxy.call(proxy.proxy.register_run, owner)
    path = credentials.write_kubeconfig(tmp_path / "run-kubeconfig")
    yield credentials, path
    proxy.call(proxy.proxy.unregister_run, credentials.token)


def reference_to(obj: dict[str, Any]) -> dict[str, str]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"]}


def proxy_request(credentials: RunCredentials | None, port: int, ca_pem: bytes, method: str, path: str,
                  body: Any = None, content_type: str = "application/json",
                  token: str | None = None) -> tuple[int, str, Any]:
    """A raw HTTPS request to the proxy: (status, content type, decoded JSON body)."""
    headers = {"Accept": "application/json"}
    bearer = token if token is not None else credentials.token if credentials else None
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    payload = None
    if body is not None:
        payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        headers["Content-Type"] = content_type
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30,
                                       context=ssl.create_default_context(cadata=ca_pem.decode()))
    try:
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", json.loads(response.read())
    finally:
        conn.close()


def api_through(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


# -- creates with the Python client -----------------------------------------------------------------


def test_python_client_create_gets_owner_reference(cluster: Cluster, proxy: ProxyThread, namespace: str,
                                                   owner: dict[str, Any],
                                                   run: tuple[RunCredentials, Path]) -> None:
    with api_through(run[1]) as api:
        created = client.CoreV1Api(api).create_namespaced_config_map(
            namespace, {"metadata": {"name": "child"}, "data": {"a": "1"}})
    assert created.metadata.owner_references[0].uid == owner["metadata"]["uid"]
    live = cluster.get_json("configmap", "child", "-n", namespace)
    assert live["metadata"]["ownerReferences"] == [reference_to(owner)]
    assert live["data"] == {"a": "1"}
    key = ownership.OwnerKey("example.com/v1", "Database", namespace, "orders")
    assert (key, ownership.ChildRef("v1", "", "v1", "ConfigMap", "configmaps", namespace, "child",
                                    "ownerReference")) in proxy.children
    kinds = proxy.child_kinds(key)
    assert ownership.ChildKind("", "v1", "ConfigMap", "configmaps", True, "ownerReference") in kinds


def test_cluster_scoped_child_gets_annotations(cluster: Cluster, proxy: ProxyThread, namespace: str,
                                               run: tuple[RunCredentials, Path]) -> None:
    name = f"reader-{namespace}"
    with api_through(run[1]) as api:
        client.RbacAuthorizationV1Api(api).create_cluster_role({
            "metadata": {"name": name, "annotations": {"keep": "me"}},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})
    live = cluster.get_json("clusterrole", name)
    assert live["metadata"]["annotations"] == {
        "keep": "me", "operator-sdk/primary-resource": f"{namespace}/orders",
        "operator-sdk/primary-resource-type": "Database.example.com"}
    assert "ownerReferences" not in live["metadata"]
    key = ownership.OwnerKey("example.com/v1", "Database", namespace, "orders")
    assert ownership.ChildKind("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False,
                               "annotations") in proxy.child_kinds(key)


def test_child_in_another_namespace_gets_annotations(cluster: Cluster, namespace: str,
                                                     run: tuple[RunCredentials, Path]) -> None:
    other = f"{namespace}-other"
    cluster.kubectl("create", "namespace", other)
    with api_through(run[1]) as api:
        client.CoreV1Api(api).create_namespaced_config_map(other, {"metadata": {"name": "far"}})
    live = cluster.get_json("configmap", "far", "-n", other)
    assert live["metadata"]["annotations"]["operator-sdk/primary-resource"] == f"{namespace}/orders"
    assert "ownerReferences" not in live["metadata"]


def test_cluster_scoped_owner_gets_owner_reference(cluster: Cluster, proxy: ProxyThread, namespace: str,
                                                   tmp_path: Path) -> None:
    owner = cluster.get_json("namespace", namespace)
    credentials = proxy.call(proxy.proxy.register_run, owner)
    with api_through(credentials.write_kubeconfig(tmp_path / "kc")) as api:
        client.CoreV1Api(api).create_namespaced_config_map(namespace, {"metadata": {"name": "of-namespace"}})
    live = cluster.get_json("configmap", "of-namespace", "-n", namespace)
    assert live["metadata"]["ownerReferences"] == [reference_to(owner)]


def test_generate_name_and_dry_run(cluster: Cluster, proxy: ProxyThread, namespace: str,
                                   run: tuple[RunCredentials, Path]) -> None:
    with api_through(run[1]) as api:
        core = client.CoreV1Api(api)
        generated = core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "gen-"}})
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "dry"}}, dry_run="All")
    name = generated.metadata.name
    assert name.startswith("gen-")
    assert cluster.get_json("configmap", name, "-n", namespace)["metadata"]["ownerReferences"][0]["name"] == "orders"
    names = {child.name for key, child in proxy.children if key.namespace == namespace}
    assert name in names
    assert "dry" not in names


# -- server-side apply --------------------------------------------------------------------------------


def test_server_side_apply_creating_a_deployment_gets_owner_reference(
        cluster: Cluster, proxy: ProxyThread, namespace: str, owner: dict[str, Any],
        run: tuple[RunCredentials, Path]) -> None:
    credentials = run[0]
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/web?fieldManager=x"
    manifest = (MANIFESTS / "deploy.yaml").read_text()
    status, _, created = proxy_request(credentials, proxy.proxy.port, credentials.ca_pem, "PATCH", path,
                                       manifest, content_type="application/apply-patch+yaml")
    assert status == 201, created
    assert created["metadata"]["ownerReferences"] == [reference_to(owner)]
    # a re-apply must keep the reference the first apply set (the manager owns it now)
    changed = manifest.replace("replicas: 1", "replicas: 2")
    status, _, updated = proxy_request(credentials, proxy.proxy.port, credentials.ca_pem, "PATCH", path,
                                       changed, content_type="application/apply-patch+yaml")
    assert status == 200, updated
    live = cluster.get_json("deployment", "web", "-n", namespace)
    assert live["spec"]["replicas"] == 2
    assert live["metadata"]["ownerReferences"] == [reference_to(owner)]


def test_kubectl_server_side_apply_through_proxy(cluster: Cluster, namespace: str, owner: dict[str, Any],
                                                 run: tuple[RunCredentials, Path]) -> None:
    # client-go only sends the token over https: this is the TLS + kubeconfig check for Go clients
    done = cluster.kubectl("--kubeconfig", str(run[1]), "apply", "--server-side", "--field-manager", "kc",
                           "-n", namespace, "-f", str(MANIFESTS / "cm.yaml"))
    assert "serverside-applied" in done.stdout
    name = yaml.safe_load((MANIFESTS / "cm.yaml").read_text())["metadata"]["name"]
    live = cluster.get_json("configmap", name, "-n", namespace)
    assert live["metadata"]["ownerReferences"] == [reference_to(owner)]


def test_applying_the_owner_itself_adds_no_self_reference(cluster: Cluster, proxy: ProxyThread,
                                                          namespace: str, run: tuple[RunCredentials, Path]) -> None:
    credentials = run[0]
    body = {"apiVersion": "example.com/v1", "kind": "Database",
            "metadata": {"name": "orders", "labels": {"touched": "yes"}}}
    status, _, answer = proxy_request(credentials, proxy.proxy.port, credentials.ca_pem, "PATCH",
                                      f"/apis/example.com/v1/namespaces/{namespace}/databases/orders"
                                      "?fieldManager=self&force=true", body,
                                      content_type="application/apply-patch+yaml")
    assert status == 200, answer
    live = cluster.get_json("db", "orders", "-n", namespace)
    assert live["metadata"]["labels"] == {"touched": "yes"}
    assert "ownerReferences" not in live["metadata"]


# -- forwarding ---------------------------------------------------------------------------------------


def test_errors_pass_through_unchanged(proxy: ProxyThread, namespace: str,
                                       run: tuple[RunCredentials, Path]) -> None:
    credentials = run[0]
    status, content_type, body = proxy_request(credentials, proxy.proxy.port, credentials.ca_pem, "GET",
                                               f"/api/v1/namespaces/{namespace}/configmaps/missing")
    assert (status, content_type) == (404, "application/json")
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "NotFound", 404)
    with api_through(run[1]) as api, pytest.raises(ApiException) as raised:
        client.CoreV1Api(api).create_namespaced_config_map(namespace, {"metadata": {"name": "Bad_Name"}})
    assert raised.value.status == 422
    assert json.loads(raised.value.body)["reason"] == "Invalid"


def test_watch_streams_events(cluster: Cluster, proxy: ProxyThread, namespace: str,
                              run: tuple[RunCredentials, Path]) -> None:
    credentials = run[0]
    conn = http.client.HTTPSConnection("127.0.0.1", proxy.proxy.port, timeout=15,
                                       context=ssl.create_default_context(cadata=credentials.ca_pem.decode()))
    try:
        conn.request("GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion=0",
                     headers={"Authorization": f"Bearer {credentials.token}", "Accept": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type", "").startswith("application/json")
        seen: list[str] = []
        for created in ("w1", "w2"):
            cluster.kubectl("create", "configmap", created, "-n", namespace)
            while created not in seen:  # each event arrives as soon as it happens (socket timeout fails)
                event = json.loads(response.readline())
                if event["type"] == "ADDED":
                    seen.append(event["object"]["metadata"]["name"])
        assert seen[-2:] == ["w1", "w2"]
    finally:
        conn.close()


@pytest.mark.parametrize("token", ["", "not-a-run-token", "revoked"])
def test_requests_without_a_live_run_token_are_unauthorized(proxy: ProxyThread, owner: dict[str, Any],
                                                            token: str) -> None:
    if token == "revoked":
        credentials = proxy.call(proxy.proxy.register_run, owner)
        proxy.call(proxy.proxy.unregister_run, credentials.token)
        token = credentials.token
    status, _, body = proxy_request(None, proxy.proxy.port, proxy.proxy.ca_pem, "GET", "/api/v1/namespaces",
                                    token=token)
    assert status == 401
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Unauthorized", 401)


def test_inject_false_only_forwards(cluster: Cluster, namespace: str, owner: dict[str, Any], tmp_path: Path) -> None:
    plain = ProxyThread(upstream_of(cluster), inject=False)
    try:
        credentials = plain.call(plain.proxy.register_run, owner)
        with api_through(credentials.write_kubeconfig(tmp_path / "kc")) as api:
            client.CoreV1Api(api).create_namespaced_config_map(namespace, {"metadata": {"name": "plain"}})
        live = cluster.get_json("configmap", "plain", "-n", namespace)
        assert "ownerReferences" not in live["metadata"]
        assert not plain.children
        assert plain.child_kinds(ownership.Owner.from_object(owner).key) == frozenset()
    finally:
        plain.close()


# -- a real Ansible run -------------------------------------------------------------------------------

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: server-side apply a deployment
      kubernetes.core.k8s:
        apply: true
        server_side_apply:
          field_manager: ansible-proxy
        namespace: "{{ ns }}"
        src: "{{ manifest }}"
    - name: create a configmap
      kubernetes.core.k8s:
        namespace: "{{ ns }}"
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata: {name: made-by-ansible}
"""


def test_ansible_playbook_through_proxy(cluster: Cluster, namespace: str, owner: dict[str, Any],
                                        run: tuple[RunCredentials, Path], tmp_path: Path) -> None:
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    env = cluster.env()
    env.update(HOME=str(tmp_path), K8S_AUTH_KUBECONFIG=str(run[1]), KUBECONFIG=str(run[1]),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_LOCALHOST_WARNING="False",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="False", ANSIBLE_NOCOLOR="1")
    variables = json.dumps({"ns": namespace, "manifest": str(MANIFESTS / "deploy.yaml")})
    done = subprocess.run([find_binary("ansible-playbook"), str(playbook), "-e", variables], env=env,
                          capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    deployment = cluster.get_json("deployment", "web", "-n", namespace, "--show-managed-fields")
    assert deployment["metadata"]["ownerReferences"] == [reference_to(owner)]
    assert {entry["manager"] for entry in deployment["metadata"]["managedFields"]} >= {"ansible-proxy"}
    configmap = cluster.get_json("configmap", "made-by-ansible", "-n", namespace)
    assert configmap["metadata"]["ownerReferences"] == [reference_to(owner)]


def test_unreachable_upstream_is_a_503_status(tmp_path: Path, owner: dict[str, Any]) -> None:
    from support.cluster import free_port

    dead = ProxyThread(Connection(server=f"https://127.0.0.1:{free_port()}"))
    try:
        credentials = dead.call(dead.proxy.register_run, owner)
        status, _, body = proxy_request(credentials, dead.proxy.port, credentials.ca_pem, "GET", "/api/v1")
        assert status == 503
        assert (body["kind"], body["reason"]) == ("Status", "ServiceUnavailable")
    finally:
        dead.close()


def test_stopping_closes_an_idle_keep_alive_connection(cluster: Cluster, owner: dict[str, Any]) -> None:
    """An idle client never answers the TLS close_notify: stop() must still close the socket it held."""
    own = ProxyThread(upstream_of(cluster))
    credentials = own.call(own.proxy.register_run, owner)
    conn = http.client.HTTPSConnection("127.0.0.1", own.proxy.port, timeout=15,
                                       context=ssl.create_default_context(cadata=credentials.ca_pem.decode()))
    try:
        conn.request("GET", "/api/v1/namespaces", headers={"Authorization": f"Bearer {credentials.token}"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200 and response.getheader("Connection", "keep-alive") != "close"
        own.close()
    finally:
        conn.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [str(w.message) for w in caught]


def test_run_kubeconfig_points_at_the_proxy(proxy: ProxyThread, owner: dict[str, Any], tmp_path: Path) -> None:
    credentials = proxy.call(proxy.proxy.register_run, owner)
    other = proxy.call(proxy.proxy.register_run, owner)
    path = credentials.write_kubeconfig(tmp_path / "deep" / "kubeconfig")
    document = yaml.safe_load(path.read_text())
    assert path.stat().st_mode & 0o777 == 0o600
    assert document["clusters"][0]["cluster"]["server"] == f"https://127.0.0.1:{proxy.proxy.port}"
    assert base64.b64decode(document["clusters"][0]["cluster"]["certificate-authority-data"]) == proxy.proxy.ca_pem
    assert document["users"][0]["user"] == {"token": credentials.token}
    assert document["contexts"][0]["context"]["namespace"] == owner["metadata"]["namespace"]
    assert len(credentials.token) >= 40
    assert other.token != credentials.token
    assert credentials.token not in repr(credentials)


# -- never adopting someone else's object (issue 14, gap 3) ---------------------------------------------

FORCE_PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: the SDK's finalizerconcurrencyfinalizer.yml, as a finalizer writes a result
      kubernetes.core.k8s:
        force: yes
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata: {name: finalizer-concurrency-results, namespace: "{{ ns }}"}
          data: {finalizer: success}
"""


def test_a_forced_replace_of_someone_elses_object_does_not_adopt_it(
        cluster: Cluster, proxy: ProxyThread, namespace: str, owner: dict[str, Any],
        run: tuple[RunCredentials, Path], tmp_path: Path) -> None:
    """finalizerconcurrencytest: a finalizer playbook's ``k8s force: yes`` (PUT) on a ConfigMap the test made
    must not give it an owner reference, or garbage collection deletes it with the CR."""
    cluster.kubectl("create", "configmap", "finalizer-concurrency-results", "-n", namespace)
    playbook = tmp_path / "force.yml"
    playbook.write_text(FORCE_PLAYBOOK)
    env = cluster.env()
    env.update(HOME=str(tmp_path), K8S_AUTH_KUBECONFIG=str(run[1]), KUBECONFIG=str(run[1]),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_LOCALHOST_WARNING="False",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="False", ANSIBLE_NOCOLOR="1")
    done = subprocess.run([find_binary("ansible-playbook"), str(playbook), "-e", json.dumps({"ns": namespace})],
                          env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    live = cluster.get_json("configmap", "finalizer-concurrency-results", "-n", namespace)
    assert live["data"] == {"finalizer": "success"}
    assert "ownerReferences" not in live["metadata"]
    assert "finalizer-concurrency-results" not in {c.name for k, c in proxy.children if k.namespace == namespace}


def test_a_replace_keeps_the_link_an_object_already_has(
        cluster: Cluster, proxy: ProxyThread, namespace: str, owner: dict[str, Any],
        run: tuple[RunCredentials, Path]) -> None:
    credentials = run[0]
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine"}, "data": {"v": "1"}}
    status, _, created = proxy_request(credentials, proxy.proxy.port, credentials.ca_pem, "POST",
                                       f"/api/v1/namespaces/{namespace}/configmaps", body)
    assert status == 201 and created["metadata"]["ownerReferences"] == [reference_to(owner)]
    replaced = {**body, "data": {"v": "2"}}  # a whole-object replace that does not restate the reference
    status, _, answer = proxy_request(credentials, proxy.proxy.port, credentials.ca_pem, "PUT",
                                      f"/api/v1/namespaces/{namespace}/configmaps/mine", replaced)
    assert status == 200, answer
    live = cluster.get_json("configmap", "mine", "-n", namespace)
    assert live["data"] == {"v": "2"}
    assert live["metadata"]["ownerReferences"] == [reference_to(owner)]


def test_server_side_apply_onto_someone_elses_object_does_not_adopt_it(
        cluster: Cluster, proxy: ProxyThread, namespace: str, owner: dict[str, Any],
        run: tuple[RunCredentials, Path]) -> None:
    credentials = run[0]
    cluster.kubectl("create", "configmap", "theirs", "-n", namespace, "--from-literal=a=b")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "theirs"}, "data": {"c": "d"}}
    status, _, answer = proxy_request(credentials, proxy.proxy.port, credentials.ca_pem, "PATCH",
                                      f"/api/v1/namespaces/{namespace}/configmaps/theirs?fieldManager=run",
                                      body, content_type="application/apply-patch+yaml")
    assert status == 200, answer
    live = cluster.get_json("configmap", "theirs", "-n", namespace)
    assert live["data"] == {"a": "b", "c": "d"}
    assert "ownerReferences" not in live["metadata"]
