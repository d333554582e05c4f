"""kopf operators run against `hybrid-operator cluster`.

The hybrid operator is built on kopf, so a real ``kopf run`` process (the
small Gadget operator in ``kopf_operator/``) must see its resources, run its
create/update/delete handlers, keep its finalizer, write handler results to
``/status``, post events, and (without ``--standalone``) keep its peering
object alive.  The checks go through kubectl, the Python client and the
operator's log.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client, config, watch

from support.cluster import Cluster

# fully qualified: other test modules on the session cluster serve a Gadget kind of their own
GADGETS = "gadgets.demo.hybrid.dev"

pytestmark = pytest.mark.integration

OPERATOR_DIR = Path(__file__).parent / "kopf_operator"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    """Poll ``probe`` until it returns something other than None (or fail after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


class KopfOperator:
    """A ``python -m kopf run`` subprocess pointed at the test cluster through KUBECONFIG."""

    def __init__(self, cluster: Cluster, namespace: str, log_path: Path, *flags: str) -> None:
        self.log_path = log_path
        command = [sys.executable, "-m", "kopf", "run", "--namespace", namespace, *flags,
                   str(OPERATOR_DIR / "gadgets.py")]
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(command, env=cluster.env(), stdout=log, stderr=subprocess.STDOUT,
                                            cwd=log_path.parent)
        wait_for(lambda: True if "Initial authentication has finished" in self.log() else None,
                 "kopf to log in", timeout=60)

    def log(self) -> str:
        if self.process.poll() is not None:
            pytest.fail(f"kopf exited with {self.process.returncode}:\n{self.log_path.read_text()}")
        return self.log_path.read_text()

    def wait_for_line(self, line: str) -> None:
        wait_for(lambda: True if line in self.log() else None, f"kopf to log {line!r}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


def gadget(name: str, **spec: Any) -> str:
    return json.dumps({"apiVersion": "demo.hybrid.dev/v1", "kind": "Gadget", "metadata": {"name": name},
                       "spec": spec})


@pytest.fixture(scope="module")
def cluster(shared_cluster: Cluster) -> Cluster:
    """The module's shared cluster, with this module's CRDs installed (overrides the per-test fixture)."""
    for crd in ("crd-gadget.yaml", "crd-peering.yaml"):
        shared_cluster.kubectl("apply", "-f", str(OPERATOR_DIR / crd))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd/gadgets.demo.hybrid.dev",
                           "crd/kopfpeerings.kopf.dev")
    return shared_cluster


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfOperator]:
    cluster.kubectl("create", "namespace", "gadgets")
    running = KopfOperator(cluster, "gadgets", tmp_path_factory.mktemp("kopf") / "kopf.log", "--standalone")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def custom(cluster: Cluster) -> Iterator[client.CustomObjectsApi]:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        yield client.CustomObjectsApi(api)
    finally:
        api.close()


def status_of(cluster: Cluster, name: str, key: str, namespace: str = "gadgets") -> Any:
    return cluster.get_json(GADGETS, name, "-n", namespace).get("status", {}).get(key)


def events_for(cluster: Cluster, name: str, reason: str) -> list[dict[str, Any]] | None:
    found = cluster.get_json("events", "-n", "gadgets", "--field-selector", f"involvedObject.name={name}")
    matching = [event for event in found["items"] if event["reason"] == reason]
    return matching or None


def test_create_handler_result_is_written_to_status(operator: KopfOperator, cluster: Cluster) -> None:
    cluster.kubectl("apply", "-n", "gadgets", "-f", "-", input_text=gadget("g-create", size=3, color="red"))
    created = wait_for(lambda: status_of(cluster, "g-create", "created"), "status.created")
    # the CRD has a status subresource: .status only changes when kopf patches /status
    assert created == {"size": 3, "color": "red"}
    live = cluster.get_json(GADGETS, "g-create", "-n", "gadgets")
    assert live["metadata"]["finalizers"] == [FINALIZER]
    assert live["metadata"]["generation"] == 1
    handled = json.loads(live["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"])
    assert handled["spec"] == {"size": 3, "color": "red"}
    log = operator.log()
    assert "[gadgets/g-create] CREATE-HANDLER g-create size=3" in log
    assert "[gadgets/g-create] Handler 'created' succeeded." in log
    assert "[gadgets/g-create] Creation is processed: 1 succeeded; 0 failed." in log


def test_kopf_info_posts_an_event(operator: KopfOperator, cluster: Cluster) -> None:
    cluster.kubectl("apply", "-n", "gadgets", "-f", "-", input_text=gadget("g-event", size=7))
    [event] = wait_for(lambda: events_for(cluster, "g-event", "GadgetCreated"), "the GadgetCreated event")
    uid = cluster.get_json(GADGETS, "g-event", "-n", "gadgets")["metadata"]["uid"]
    assert event["message"] == "created g-event with size 7"
    assert event["type"] == "Normal"
    assert event["metadata"]["name"].startswith("kopf-event-")  # generateName was honoured
    assert event["involvedObject"] == {"apiVersion": "demo.hybrid.dev/v1", "kind": "Gadget",
                                       "name": "g-event", "namespace": "gadgets", "uid": uid}
    table = cluster.kubectl("get", "events", "-n", "gadgets", "--field-selector", "involvedObject.name=g-event")
    assert re.search(r"Normal\s+GadgetCreated\s+gadget/g-event\s+created g-event with size 7", table.stdout)


def test_update_handler_sees_the_diff(operator: KopfOperator, cluster: Cluster) -> None:
    cluster.kubectl("apply", "-n", "gadgets", "-f", "-", input_text=gadget("g-update", size=1, color="blue"))
    wait_for(lambda: status_of(cluster, "g-update", "created"), "status.created")
    cluster.kubectl("patch", GADGETS, "g-update", "-n", "gadgets", "--type=merge", "-p", '{"spec":{"size":5}}')
    updated = wait_for(lambda: status_of(cluster, "g-update", "updated/spec"), "status of the update handler")
    assert updated == {"size": 5, "changed": ["size"]}
    assert status_of(cluster, "g-update", "created") == {"size": 1, "color": "blue"}
    [event] = wait_for(lambda: events_for(cluster, "g-update", "GadgetUpdated"), "the GadgetUpdated event")
    assert event["message"] == "updated g-update: size"
    operator.wait_for_line("[gadgets/g-update] Updating is processed: 1 succeeded; 0 failed.")
    assert "UPDATE-HANDLER g-update size=5" in operator.log()


def test_delete_handler_runs_before_the_finalizer_is_released(operator: KopfOperator, cluster: Cluster,
                                                              custom: client.CustomObjectsApi) -> None:
    cluster.kubectl("apply", "-n", "gadgets", "-f", "-", input_text=gadget("g-delete", size=2))
    wait_for(lambda: status_of(cluster, "g-delete", "created"), "status.created")
    version = cluster.get_json(GADGETS, "g-delete", "-n", "gadgets")["metadata"]["resourceVersion"]
    cluster.kubectl("delete", GADGETS, "g-delete", "-n", "gadgets", "--timeout=30s")  # waits until it is gone
    assert "NotFound" in cluster.kubectl("get", GADGETS, "g-delete", "-n", "gadgets", check=False).stderr

    history: list[tuple[str, list[str], bool]] = []
    stream = watch.Watch()
    for event in stream.stream(custom.list_namespaced_custom_object, "demo.hybrid.dev", "v1", "gadgets",
                               "gadgets", resource_version=version, timeout_seconds=10,
                               field_selector="metadata.name=g-delete"):
        metadata = event["object"]["metadata"]
        history.append((event["type"], metadata.get("finalizers", []), "deletionTimestamp" in metadata))
        if event["type"] == "DELETED":
            stream.stop()
    # DELETE only marked the object; kopf ran the handler, then removed its finalizer
    marked = [entry for entry in history if entry[2]]
    assert marked[0] == ("MODIFIED", [FINALIZER], True)
    assert marked[-1] == ("DELETED", [], True)
    log = operator.log()
    assert "[gadgets/g-delete] DELETE-HANDLER g-delete" in log
    assert "[gadgets/g-delete] Deletion is processed: 1 succeeded; 0 failed." in log


def test_standalone_operator_logged_no_errors(operator: KopfOperator) -> None:
    log = operator.log()
    assert "Activity 'login_via_client' succeeded." in log
    assert "[ERROR" not in log
    assert "Traceback" not in log


def test_operator_with_peering(cluster: Cluster, tmp_path: Path) -> None:
    cluster.kubectl("create", "namespace", "peered")
    cluster.kubectl("apply", "-n", "peered", "-f", "-",
                    input_text='{"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "default"}}')

    def peers() -> dict[str, Any] | None:
        status = cluster.get_json("kopfpeering", "default", "-n", "peered").get("status")
        return status or None

    peered = KopfOperator(cluster, "peered", tmp_path / "kopf.log")
    try:
        [keepalive] = wait_for(peers, "kopf's keep-alive in the peering object").values()
        assert keepalive["lifetime"] == 60
        assert keepalive["priority"] == 0
        assert keepalive["lastseen"]
        cluster.kubectl("apply", "-n", "peered", "-f", "-", input_text=gadget("g-peer", size=4))
        created = wait_for(lambda: status_of(cluster, "g-peer", "created", "peered"), "status.created")
        assert created == {"size": 4, "color": "none"}
    finally:
        code = peered.stop()
    assert code == 0
    log = tmp_path.joinpath("kopf.log").read_text()
    assert "Signal SIGTERM is received. Operator is stopping." in log
    assert "[ERROR" not in log
    # on a clean exit kopf withdraws its keep-alive from the peering object
    assert cluster.get_json("kopfpeering", "default", "-n", "peered").get("status", {}) == {}
