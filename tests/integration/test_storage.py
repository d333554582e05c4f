"""Storage on the embedded cluster: the default StorageClass, provisioned volumes, protection finalizers.

Why this exists: charts with persistence and roles that wait for claims stall unless claims bind,
and `helm uninstall --wait` (or a Helm CR with uninstall-wait) hangs forever unless the
`kubernetes.io/pvc-protection` finalizer goes once no Pod uses the claim.  These tests drive
kubectl, helm and an Ansible role (kubernetes.core.k8s_info with wait/until) against the server.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cluster import Cluster, find_binary

pytestmark = pytest.mark.integration


@pytest.fixture
def ns(shared_cluster: Cluster) -> str:
    name = f"st-{uuid.uuid4().hex[:8]}"
    shared_cluster.kubectl("create", "namespace", name)
    return name


def wait_until(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)
    return result


def claim(name: str, size: str = "1Gi", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, **spec}}


def pod_using(name: str, claim_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}}


def apply(cluster: Cluster, namespace: str, *docs: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=yaml.safe_dump_all(docs))


def gone(cluster: Cluster, *args: str) -> bool:
    return "(NotFound)" in cluster.kubectl("get", *args, check=False).stderr


def test_default_storage_class_provisions_and_binds(shared_cluster: Cluster, ns: str) -> None:
    sc = shared_cluster.get_json("storageclass", "standard")
    assert sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    apply(shared_cluster, ns, claim("data", "3Gi"))
    shared_cluster.kubectl("wait", "--for=jsonpath={.status.phase}=Bound", "pvc/data", "-n", ns, "--timeout=20s")
    pvc = shared_cluster.get_json("pvc", "data", "-n", ns)
    assert pvc["spec"]["storageClassName"] == "standard"
    assert pvc["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert pvc["status"]["capacity"] == {"storage": "3Gi"}
    volume = pvc["spec"]["volumeName"]
    assert volume == f"pvc-{pvc['metadata']['uid']}"
    pv = shared_cluster.get_json("pv", volume)
    assert pv["status"]["phase"] == "Bound"
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    assert pv["spec"]["capacity"] == {"storage": "3Gi"}
    assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]

    shared_cluster.kubectl("delete", "pvc", "data", "-n", ns, "--timeout=20s")
    wait_until("the volume to be reclaimed", lambda: gone(shared_cluster, "pv", volume))


def test_a_claim_in_use_waits_for_its_pod(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, claim("data"), pod_using("user", "data"))
    shared_cluster.kubectl("wait", "--for=condition=Ready", "pod/user", "-n", ns, "--timeout=20s")
    shared_cluster.kubectl("delete", "pvc", "data", "-n", ns, "--wait=false")
    time.sleep(1)
    held = shared_cluster.get_json("pvc", "data", "-n", ns)
    assert held["metadata"]["deletionTimestamp"], "pvc-protection holds a claim a Pod uses"
    volume = held["spec"]["volumeName"]
    shared_cluster.kubectl("delete", "pod", "user", "-n", ns)
    wait_until("the claim to go", lambda: gone(shared_cluster, "pvc", "data", "-n", ns))
    wait_until("its volume to go", lambda: gone(shared_cluster, "pv", volume))


def test_retained_volume_is_released_and_a_static_volume_binds(shared_cluster: Cluster, ns: str) -> None:
    static = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"static-{ns}"},
              "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                       "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/tmp/x"}}}
    shared_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(static))
    apply(shared_cluster, ns, claim("manual", storageClassName=""))
    shared_cluster.kubectl("wait", "--for=jsonpath={.status.phase}=Bound", "pvc/manual", "-n", ns,
                           "--timeout=20s")
    assert shared_cluster.get_json("pvc", "manual", "-n", ns)["spec"]["volumeName"] == f"static-{ns}"
    shared_cluster.kubectl("delete", "pvc", "manual", "-n", ns)
    shared_cluster.kubectl("wait", "--for=jsonpath={.status.phase}=Released", f"pv/static-{ns}",
                           "--timeout=20s")
    shared_cluster.kubectl("delete", "pv", f"static-{ns}", "--timeout=20s")


CHART = {
    "Chart.yaml": "apiVersion: v2\nname: keeper\nversion: 0.1.0\n",
    "values.yaml": "persistence:\n  enabled: true\n",
    "templates/pvc.yaml": """\
        {{- if .Values.persistence.enabled }}
        apiVersion: v1
        kind: PersistentVolumeClaim
        metadata:
          name: {{ .Release.Name }}-data
        spec:
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 1Gi}}
        {{- end }}
        """,
    "templates/deployment.yaml": """\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {{ .Release.Name }}
        spec:
          replicas: 1
          selector: {matchLabels: {app: {{ .Release.Name }}}}
          template:
            metadata: {labels: {app: {{ .Release.Name }}}}
            spec:
              containers: [{name: app, image: "nginx:1.27"}]
              volumes: [{name: data, persistentVolumeClaim: {claimName: {{ .Release.Name }}-data}}]
        """,
    "templates/tests/ping.yaml": """\
        apiVersion: v1
        kind: Pod
        metadata:
          name: {{ .Release.Name }}-ping
          annotations: {"helm.sh/hook": test}
        spec:
          restartPolicy: Never
          containers: [{name: ping, image: busybox, command: [wget, "{{ .Release.Name }}"]}]
        """,
}


def test_helm_chart_with_persistence_installs_tests_and_uninstalls_with_wait(shared_cluster: Cluster, ns: str,
                                                                             tmp_path: Path) -> None:
    chart = tmp_path / "keeper"
    for name, text in CHART.items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(textwrap.dedent(text))
    shared_cluster.helm("install", "keep", str(chart), "-n", ns, "--wait", "--timeout", "60s")
    assert shared_cluster.get_json("pvc", "keep-data", "-n", ns)["status"]["phase"] == "Bound"
    tested = shared_cluster.helm("test", "keep", "-n", ns, "--timeout", "60s")
    assert "Phase:          Succeeded" in tested.stdout
    shared_cluster.helm("uninstall", "keep", "-n", ns, "--wait", "--timeout", "60s")
    assert gone(shared_cluster, "pvc", "keep-data", "-n", ns)
    assert shared_cluster.get_json("pods", "-n", ns, "-l", "app=keep")["items"] == []


ROLE_PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: the StatefulSet
      kubernetes.core.k8s:
        namespace: "{{ ns }}"
        definition:
          apiVersion: apps/v1
          kind: StatefulSet
          metadata: {name: store}
          spec:
            replicas: 2
            serviceName: store
            selector: {matchLabels: {app: store}}
            template:
              metadata: {labels: {app: store}}
              spec: {containers: [{name: db, image: "postgres:16"}]}
            volumeClaimTemplates:
              - metadata: {name: data}
                spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
    - name: wait for its Pods
      kubernetes.core.k8s_info:
        kind: Pod
        namespace: "{{ ns }}"
        label_selectors: [app=store]
        wait: true
        wait_condition: {type: Ready, status: "True"}
        wait_timeout: 60
      register: store_pods
      until: store_pods.resources | length == 2
      retries: 30
      delay: 1
    - name: wait for its claims
      kubernetes.core.k8s_info:
        kind: PersistentVolumeClaim
        namespace: "{{ ns }}"
        label_selectors: [app=store]
      register: claims
      until: claims.resources | length == 2 and (claims.resources | map(attribute='status.phase') | unique) == ['Bound']
      retries: 30
      delay: 1
    - name: proceed
      ansible.builtin.debug:
        msg: "{{ store_pods.resources | map(attribute='metadata.name') | sort }}"
"""


def test_a_role_waiting_for_statefulset_pods_and_claims_proceeds(shared_cluster: Cluster, ns: str,
                                                                 tmp_path: Path) -> None:
    playbook = tmp_path / "wait.yml"
    playbook.write_text(ROLE_PLAYBOOK)
    env = shared_cluster.env()
    env.update(HOME=str(tmp_path), K8S_AUTH_KUBECONFIG=str(shared_cluster.kubeconfig), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_DEPRECATION_WARNINGS="False")
    done = subprocess.run([find_binary("ansible-playbook"), str(playbook), "-e", json.dumps({"ns": ns})],
                          env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    tasks = {t["task"]["name"]: t["hosts"]["localhost"] for t in json.loads(done.stdout)["plays"][0]["tasks"]}
    assert tasks["proceed"]["msg"] == ["store-0", "store-1"]
