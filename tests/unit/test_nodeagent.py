"""Unit tests for the node agent's pure parts and the simulated node's shared logic.

The kubeconfig reader (every way a kubeconfig names a server and credentials, and the refusals), the work
queue's guarantees, what the scheduler decides from a Pod's claims (the claim patches it would send are
recorded by a fake client, which decides nothing), when a Node's stored status counts as reported, and
the shared pure functions (image names, the address pool, nodeSelector fit, claim names).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from hybrid_operator.localcluster import tls
from hybrid_operator.localcluster.nodeagent import kubeconfig
from hybrid_operator.localcluster.nodeagent.context import AgentContext
from hybrid_operator.localcluster.nodeagent.informer import Informer
from hybrid_operator.localcluster.nodeagent.node import _reported
from hybrid_operator.localcluster.nodeagent.storage import UNBOUND_IMMEDIATE, Provisioner
from hybrid_operator.localcluster.nodeagent.workqueue import WorkQueue
from hybrid_operator.localcluster.simnode import node as simnode
from hybrid_operator.localcluster.simnode import podstatus

pytestmark = pytest.mark.unit


# -- kubeconfig ----------------------------------------------------------------------------------------


def _write(path: Path, cluster: dict[str, Any], user: dict[str, Any], context: str = "c") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "k", "cluster": cluster}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": user}]}))
    return path


def _ca(tmp_path: Path) -> tuple[bytes, tuple[Any, Any]]:
    ca = tls.new_ca("test-ca")
    return tls.cert_pem(ca[0]), ca


def test_a_token_and_inline_ca_make_a_bearer_endpoint(tmp_path: Path) -> None:
    ca_pem, _ = _ca(tmp_path)
    path = _write(tmp_path / "config", {"server": "https://127.0.0.1:6443/",
                                         "certificate-authority-data": base64.b64encode(ca_pem).decode()},
                  {"token": "abc"})
    endpoint = kubeconfig.load(path)
    assert endpoint.server == "https://127.0.0.1:6443"
    assert endpoint.headers == {"Authorization": "Bearer abc"}
    assert endpoint.tls is not None and endpoint.tls.verify_mode.name == "CERT_REQUIRED"


def test_files_are_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    ca_pem, ca = _ca(tmp_path)
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(ca_pem)
    (tmp_path / "pki" / "token").write_text("from-file\n")
    cert, key = tls.issue(ca, tls.name("agent", "system:masters"), client=True)
    (tmp_path / "pki" / "client.crt").write_bytes(tls.cert_pem(cert))
    (tmp_path / "pki" / "client.key").write_bytes(tls.key_pem(key))
    path = _write(tmp_path / "config", {"server": "https://localhost:1", "certificate-authority": "pki/ca.crt"},
                  {"tokenFile": "pki/token", "client-certificate": "pki/client.crt", "client-key": "pki/client.key"})
    endpoint = kubeconfig.load(path)
    assert endpoint.headers == {"Authorization": "Bearer from-file"}
    assert endpoint.tls is not None


def test_inline_client_certificates_load_and_leave_no_file_behind(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "scratch"))  # where the key is written for a moment
    _, ca = _ca(tmp_path)
    cert, key = tls.issue(ca, tls.name("agent"), client=True)
    path = _write(tmp_path / "config", {"server": "https://localhost:1", "insecure-skip-tls-verify": True}, {
        "client-certificate-data": base64.b64encode(tls.cert_pem(cert)).decode(),
        "client-key-data": base64.b64encode(tls.key_pem(key)).decode()})
    endpoint = kubeconfig.load(path)
    assert endpoint.headers == {}
    assert endpoint.tls is not None and endpoint.tls.check_hostname is False
    assert list((tmp_path / "scratch").iterdir()) == []


def test_basic_credentials_and_plain_http(tmp_path: Path) -> None:
    path = _write(tmp_path / "config", {"server": "http://127.0.0.1:8080"}, {"username": "a", "password": "b"})
    endpoint = kubeconfig.load(path)
    assert endpoint.tls is None
    assert endpoint.headers == {"Authorization": "Basic " + base64.b64encode(b"a:b").decode()}


@pytest.mark.parametrize(("cluster", "user", "context", "message"), [
    ({"server": "https://x"}, {"exec": {"command": "aws"}}, "c",
     "the user runs an exec plugin, which the node agent does not run"),
    ({"server": "https://x"}, {"auth-provider": {"name": "gcp"}}, "c", "the user runs an auth-provider plugin"),
    ({"server": "https://x"}, {}, "nope", "no context named 'nope' in contexts"),
    ({"server": "ftp://x"}, {}, "c", "cluster 'k' has no https:// or http:// server"),
    ({"server": "https://x", "certificate-authority-data": "%%%"}, {}, "c", "certificate-authority-data is not base64"),
    ({"server": "https://x", "certificate-authority": "missing.crt"}, {}, "c", "certificate-authority "),
    ({"server": "https://x"}, {"client-certificate-data": "YQ=="}, "c",
     "a client certificate needs both client-certificate and client-key"),
    ({"server": "https://x"}, {"tokenFile": "nowhere"}, "c", "tokenFile "),
])
def test_unusable_kubeconfigs_are_refused_naming_the_file_and_field(
        tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], context: str, message: str) -> None:
    path = _write(tmp_path / "config", cluster, user, context)
    with pytest.raises(kubeconfig.KubeconfigError) as refused:
        kubeconfig.load(path)
    assert str(refused.value).startswith(f"{path}: ")
    assert message in str(refused.value)


def test_a_file_that_is_not_a_kubeconfig_is_refused(tmp_path: Path) -> None:
    (tmp_path / "list").write_text("- a\n")
    with pytest.raises(kubeconfig.KubeconfigError, match="not a kubeconfig"):
        kubeconfig.load(tmp_path / "list")
    with pytest.raises(kubeconfig.KubeconfigError, match="cannot read it"):
        kubeconfig.load(tmp_path / "absent")


# -- work queue ----------------------------------------------------------------------------------------


async def test_a_key_is_queued_once_and_never_handed_out_twice_at_once() -> None:
    queue = WorkQueue()
    key = ("pod", "ns", "a")
    queue.add(key)
    queue.add(key)
    queue.add(("pod", "ns", "b"))
    assert await queue.get() == key
    queue.add(key)  # while a worker has it: queued again only once it is done
    assert await queue.get() == ("pod", "ns", "b")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.05)
    queue.done(key)
    assert await asyncio.wait_for(queue.get(), 1) == key


async def test_a_failed_key_comes_back_after_a_growing_pause() -> None:
    queue = WorkQueue()
    key = ("claim", "ns", "c")
    queue.add(key)
    await queue.get()
    queue.done(key, failed=True)  # 0.1 s
    started = asyncio.get_running_loop().time()
    assert await asyncio.wait_for(queue.get(), 1) == key
    queue.done(key, failed=True)  # 0.2 s
    assert await asyncio.wait_for(queue.get(), 1) == key
    assert asyncio.get_running_loop().time() - started >= 0.29


# -- the scheduler's claim checks ----------------------------------------------------------------------


class RecordingClient:
    """Records the patches sent; answers them with an empty object (it decides nothing)."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((path, patch))
        return {}


def _context(client: RecordingClient, claims: list[dict[str, Any]], classes: list[dict[str, Any]]) -> AgentContext:
    def informer(items: list[dict[str, Any]]) -> Informer:
        found = Informer(client, "/x", lambda *_: None)  # type: ignore[arg-type]
        found.cache = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in items}
        return found

    return AgentContext(client=client, queue=WorkQueue(), pods=informer([]), nodes=informer([]),  # type: ignore[arg-type]
                        claims=informer(claims), volumes=informer([]), classes=informer(classes))


def _claim(name: str, storage_class: str, bound: bool = False, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "annotations": annotations},
            "spec": {"storageClassName": storage_class, **({"volumeName": f"pv-{name}"} if bound else {})},
            "status": {"phase": "Bound" if bound else "Pending"}}


CLASSES = [{"metadata": {"name": "standard"}, "provisioner": "p", "volumeBindingMode": "Immediate"},
           {"metadata": {"name": "late"}, "provisioner": "p", "volumeBindingMode": "WaitForFirstConsumer"}]


def _pod(*claims: str, ephemeral: str = "") -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    if ephemeral:
        volumes.append({"name": ephemeral, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"volumes": volumes}}


async def test_claims_decide_whether_a_pod_is_bound_waits_or_is_unschedulable() -> None:
    client = RecordingClient()
    storage = Provisioner(_context(client, [_claim("ready", "standard", bound=True), _claim("early", "standard"),
                                            _claim("lazy", "late")], CLASSES))
    assert await storage.verdict(_pod()) == ("ready", "")
    assert await storage.verdict(_pod("ready")) == ("ready", "")
    assert await storage.verdict(_pod("ready", "early")) == ("unschedulable", UNBOUND_IMMEDIATE)
    verdict, message = await storage.verdict(_pod("gone"))
    assert verdict == "unschedulable" and 'persistentvolumeclaim "gone" not found' in message
    verdict, message = await storage.verdict(_pod(ephemeral="scratch"))
    assert verdict == "unschedulable"
    assert 'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"' in message
    assert client.patches == []

    assert await storage.verdict(_pod("ready", "lazy")) == ("wait", "")
    assert client.patches == [("/api/v1/namespaces/ns/persistentvolumeclaims/lazy", {"metadata": {
        "uid": "uid-lazy", "annotations": {"volume.kubernetes.io/selected-node": "hybrid-node"}}})]


async def test_a_claim_already_given_the_node_is_not_patched_again() -> None:
    client = RecordingClient()
    selected = _claim("lazy", "late", **{"volume.kubernetes.io/selected-node": "hybrid-node"})
    storage = Provisioner(_context(client, [selected], CLASSES))
    assert await storage.verdict(_pod("lazy")) == ("wait", "")
    assert client.patches == []


# -- the Node's status ---------------------------------------------------------------------------------


def test_a_stored_status_without_empty_fields_counts_as_reported() -> None:
    wanted = simnode.node_status({}, "2026-01-01T00:00:00Z")
    stored = copy.deepcopy({key: value for key, value in wanted.items() if key != "images"})  # omitted: empty
    for condition in stored["conditions"]:
        condition["lastHeartbeatTime"] = "2025-01-01T00:00:00Z"
    assert _reported(stored, wanted)
    stored["conditions"][-1]["status"] = "Unknown"  # what node-lifecycle writes when the heartbeats stop
    assert not _reported(stored, wanted)


def test_the_lease_is_owned_by_the_node_and_renewed_as_a_kubelet_does() -> None:
    now = simnode.renew_time()
    assert now.endswith("Z") and len(now.split(".")[1]) == 7  # microseconds, as a MicroTime
    lease = simnode.lease_body("uid-1", now)
    assert lease["metadata"]["namespace"] == "kube-node-lease"
    assert lease["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "hybrid-node",
                                                     "uid": "uid-1"}]
    assert lease["spec"] == {"holderIdentity": "hybrid-node", "leaseDurationSeconds": 40, "renewTime": now}


# -- shared pure parts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "normalised"), [
    ("nginx", "docker.io/library/nginx:latest"),
    ("nginx:1.27", "docker.io/library/nginx:1.27"),
    ("bitnami/redis:7", "docker.io/bitnami/redis:7"),
    ("quay.io/prometheus/node-exporter", "quay.io/prometheus/node-exporter:latest"),
    ("localhost/app:dev", "localhost/app:dev"),
    ("registry:5000/app", "registry:5000/app:latest"),
    ("busybox@sha256:abc", "docker.io/library/busybox@sha256:abc"),
])
def test_image_names_are_reported_as_containerd_does(image: str, normalised: str) -> None:
    assert podstatus.normalised_image(image) == normalised


def test_the_address_pool_hands_out_free_addresses_and_takes_back_released_ones() -> None:
    pool = podstatus.AddressPool("10.244.0.0/29")  # .2 to .6
    pool.claim("10.244.0.3", "old")
    taken = [pool.take(f"pod-{i}") for i in range(4)]
    assert taken == ["10.244.0.2", "10.244.0.4", "10.244.0.5", "10.244.0.6"]
    with pytest.raises(RuntimeError, match="the pod CIDR is full"):
        pool.take("one-too-many")
    pool.release("10.244.0.4", "somebody-else")  # not its owner: kept
    pool.release("10.244.0.5", "pod-2")
    assert pool.take("new") == "10.244.0.5"


def test_a_node_selector_fits_the_node_labels_it_names() -> None:
    labels = simnode.node_labels()
    assert podstatus.fits({"spec": {}}, labels)
    assert podstatus.fits({"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}, labels)
    assert not podstatus.fits({"spec": {"nodeSelector": {"disktype": "ssd"}}}, labels)
    assert podstatus.fits({"spec": {"nodeSelector": {"disktype": "ssd"}}}, {**labels, "disktype": "ssd"})


def test_an_unschedulable_report_is_written_once_per_message() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}}
    assert podstatus.needs_unschedulable_report(pod)
    pod["status"] = podstatus.unschedulable_status(pod, "2026-01-01T00:00:00Z")
    assert not podstatus.needs_unschedulable_report(pod)
    assert podstatus.needs_unschedulable_report(pod, "another reason")
