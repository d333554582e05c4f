"""A Helm CR cannot write outside its namespace (docs/security.md, "Helm releases and annotation limits").

The attacker may only create custom resources of Helm kinds. Issue 28 item 4, tried through the real
entry points (a CR applied with kubectl, a real ``hybrid-operator run``, the real helm binary):

* the memcached chart as it was shipped (``imagePullPolicy`` unquoted) with a newline in
  ``spec.image.pullPolicy`` that adds a ConfigMap in ``kube-system`` and a cluster-admin
  ClusterRoleBinding: the manifest gate refuses the render, nothing is created, the CR says why;
* the same chart with a second ``image:`` key that beat ``overrideValues: image.repository``: refused;
* the shipped memcached chart now, with the same attack: every value stays one value;
* the shipped chart and the chart ``create api --new-chart`` scaffolds, rendered by helm with hostile
  values in every value: nothing escapes.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.attacker import SECURITY_GROUP, Operator, write_project
from support.cluster import REPO, Cluster, find_binary
from support.operator import apply, condition, get_or_none, install_open_crd, wait_for

pytestmark = [pytest.mark.security]

OLD = "Cache"  # the memcached chart as shipped at 3fe70cd: imagePullPolicy unquoted
NOW = "Memcache"  # the repository's charts/memcached as it is now
# charts/memcached/templates/deployment.yaml as shipped before issue 28 (the attack's target)
UNQUOTED_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.size | int }}
  selector:
    matchLabels:
      app: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app: {{ .Release.Name }}
    spec:
      containers:
        - name: memcached
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          args: ["-m", "{{ .Values.memoryMB }}", "-o", "modern", "-v"]
          ports:
            - name: memcached
              containerPort: 11211
              protocol: TCP
"""
UNQUOTED_VALUES = """\
size: 1
image:
  repository: docker.io/library/memcached
  tag: "1.6.38-alpine"
  pullPolicy: IfNotPresent
memoryMB: 64
"""
WATCHES = f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: {OLD}
  chart: charts/unquoted
  overrideValues:
    image.repository: docker.io/library/memcached
- group: {SECURITY_GROUP}
  version: v1
  kind: {NOW}
  chart: {REPO / "charts" / "memcached"}
"""


def escape(marker: str) -> str:
    """The issue's ``spec.image.pullPolicy``: ends the line, adds a ConfigMap in kube-system and a
    ClusterRoleBinding to cluster-admin, and swallows the rest of the template in a block scalar."""
    return ("IfNotPresent\n---\n"
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
            f"metadata:\n  name: {marker}\n"
            "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\n"
            "subjects:\n- kind: ServiceAccount\n  name: default\n  namespace: default\n---\n"
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {marker}\n  namespace: kube-system\n"
            "data:\n  rest: |")


@pytest.fixture(scope="module")
def cluster(shared_cluster: Cluster) -> Cluster:
    for kind in (OLD, NOW):
        install_open_crd(shared_cluster, kind, SECURITY_GROUP)
    return shared_cluster


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("helm-gate")
    watches = write_project(workdir / "project", {
        "watches.yaml": WATCHES,
        "charts/unquoted/Chart.yaml": "apiVersion: v2\nname: memcached\nversion: 0.1.0\n",
        "charts/unquoted/values.yaml": UNQUOTED_VALUES,
        "charts/unquoted/templates/deployment.yaml": UNQUOTED_DEPLOYMENT,
    })
    process = Operator(cluster, watches, workdir, workdir / "runner")
    try:
        yield process
    finally:
        process.stop()


def cache(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def settled(cluster: Cluster, kind: str, name: str) -> dict[str, Any] | None:
    """The CR once its release was deployed or failed (None before)."""
    obj = get_or_none(cluster, f"{kind.lower()}s.{SECURITY_GROUP}", name)
    for kind_of_condition in ("Deployed", "ReleaseFailed"):
        found = condition(obj or {}, kind_of_condition)
        if found and found["status"] == "True":
            return obj
    return None


def documents(manifest: str) -> list[dict[str, Any]]:
    """The objects of a manifest, every mapping key checked to be there once (a repeated key is an attack)."""

    class Strict(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            keys = [key.value for key, _ in node.value]
            assert len(keys) == len(set(keys)), f"a repeated key in {keys} (line {node.start_mark.line + 1})"
            return super().construct_mapping(node, deep)

    return [doc for doc in yaml.load_all(manifest, Loader=Strict) if isinstance(doc, dict)]


def exists(cluster: Cluster, *args: str) -> bool:
    return cluster.kubectl("get", *args, check=False).returncode == 0


def refusal_events(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    listing = cluster.get_json("events", "--field-selector", f"involvedObject.name={name}")
    return [event for event in listing["items"] if event.get("reason") == "ManifestRefused"]


def assert_refused(cluster: Cluster, obj: dict[str, Any], name: str, fragments: list[str]) -> None:
    failed = condition(obj, "ReleaseFailed")
    assert failed is not None and failed["status"] == "True" and failed["reason"] == "InstallError", failed
    assert failed["message"].startswith("the rendered manifest was refused, nothing was applied: "), failed
    for fragment in fragments:
        assert fragment in failed["message"], failed["message"]
    events = wait_for(lambda: refusal_events(cluster, name), f"a ManifestRefused Event about {name}")
    assert all(fragment in events[0]["message"] for fragment in fragments), events
    assert cluster.helm("list", "-n", "default", "-q", "--filter", f"^{name}$").stdout.strip() == ""


def test_a_newline_in_a_value_adds_no_objects_anywhere(cluster: Cluster, operator: Operator) -> None:
    name, marker = "pwn-newline", f"pwned-{uuid.uuid4().hex[:8]}"
    try:
        apply(cluster, cache(OLD, name, {"image": {"pullPolicy": escape(marker)}}))
        obj = wait_for(lambda: settled(cluster, OLD, name), f"{name}'s release to be deployed or refused")
        assert not exists(cluster, "configmap", marker, "-n", "kube-system"), "the CR wrote into kube-system"
        assert not exists(cluster, "clusterrolebinding", marker), "the CR made itself cluster-admin"
        assert not exists(cluster, "deployment", name, "-n", "default")
        assert_refused(cluster, obj, name, [f"ConfigMap {marker} (v1) names namespace kube-system, not the "
                                            "resource's namespace default", "allowCrossNamespace: true"])
    finally:
        cluster.kubectl("delete", "configmap", marker, "-n", "kube-system", "--ignore-not-found")
        cluster.kubectl("delete", "clusterrolebinding", marker, "--ignore-not-found")


def test_a_repeated_key_cannot_beat_the_override(cluster: Cluster, operator: Operator) -> None:
    name = "pwn-duplicate"
    apply(cluster, cache(OLD, name, {"image": {"pullPolicy": "IfNotPresent\n          image: evil.example/miner"}}))
    obj = wait_for(lambda: settled(cluster, OLD, name), f"{name}'s release to be deployed or refused")
    deployment = get_or_none(cluster, "deployment", name, "-n", "default")
    images = [c["image"] for c in ((deployment or {}).get("spec", {}).get("template", {}).get("spec", {})
                                   .get("containers") or [])]
    assert deployment is None, f"the spec replaced the overridden image: {images}"
    assert_refused(cluster, obj, name, [f"Deployment {name}: duplicate key spec.template.spec.containers[0].image"])


def test_the_shipped_chart_keeps_the_attack_in_one_value(cluster: Cluster, operator: Operator) -> None:
    name, marker = "pwn-shipped", f"pwned-{uuid.uuid4().hex[:8]}"
    hostile = escape(marker)
    try:
        apply(cluster, cache(NOW, name, {"image": {"pullPolicy": hostile}}))
        wait_for(lambda: settled(cluster, NOW, name), f"{name}'s release to be deployed or refused")
        assert not exists(cluster, "configmap", marker, "-n", "kube-system"), "the CR wrote into kube-system"
        assert not exists(cluster, "clusterrolebinding", marker), "the CR made itself cluster-admin"
        released = documents(cluster.helm("get", "manifest", name, "-n", "default").stdout)
        assert sorted(str(obj["kind"]) for obj in released) == ["Deployment", "Service"], released
        [deployment] = [obj for obj in released if obj["kind"] == "Deployment"]
        assert deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == hostile
    finally:
        cluster.kubectl("delete", "configmap", marker, "-n", "kube-system", "--ignore-not-found")
        cluster.kubectl("delete", "clusterrolebinding", marker, "--ignore-not-found")


# -- every value of the charts we ship and scaffold --------------------------------------------------

HOSTILE = [
    "x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: escaped, namespace: kube-system}\n",
    'x"\n          image: evil.example/miner\n          x: "',
    "x\n  namespace: kube-system\n",
    "{{ .Release.Name }}",
]


def hostile_values(chart: Path, text: str) -> dict[str, Any]:
    """The chart's values.yaml with every leaf replaced by ``text``."""

    def replace(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: replace(item) for key, item in value.items()}
        if isinstance(value, list):
            return [replace(item) for item in value]
        return text

    return dict(replace(yaml.safe_load((chart / "values.yaml").read_text())))


def scaffolded_chart(root: Path) -> Path:
    """``hybrid-operator init`` + ``create api --new-chart``: the chart a new project starts from."""
    for command in (["init", "--domain", "example.com", str(root)],
                    ["create", "api", "--group", "web", "--version", "v1", "--kind", "Site", "--new-chart",
                     "--project-dir", str(root)]):
        subprocess.run([sys.executable, "-m", "hybrid_operator.cli", *command], check=True, capture_output=True)
    return root / "charts" / "site"


@pytest.mark.parametrize("which", ["shipped memcached", "create api --new-chart"])
def test_hostile_values_stay_values_in_every_chart_we_ship(which: str, tmp_path: Path) -> None:
    chart = REPO / "charts" / "memcached" if which == "shipped memcached" else scaffolded_chart(tmp_path / "p")
    escaped = {text: escapes(chart, text, tmp_path / "values.yaml") for text in HOSTILE}
    assert {text: problem for text, problem in escaped.items() if problem} == {}


def escapes(chart: Path, text: str, values: Path) -> str:
    """How ``text``, given as every value of ``chart``, got out of its value ("" when it did not)."""
    values.write_text(yaml.safe_dump(hostile_values(chart, text)))
    rendered = subprocess.run([find_binary("helm"), "template", "r1", str(chart), "--namespace", "tenant",
                               "--values", str(values)], capture_output=True, text=True, check=False)
    if rendered.returncode != 0:
        return f"the chart no longer renders: {rendered.stderr.strip()}"
    try:
        found = documents(rendered.stdout)
    except AssertionError as exc:
        return str(exc)
    objects = sorted((obj["kind"], obj["metadata"]["name"]) for obj in found)
    if objects != [("Deployment", "r1"), ("Service", "r1")]:
        return f"rendered {objects}"
    [deployment] = [obj for obj in found if obj["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    if (container.get("imagePullPolicy"), container.get("image")) != (text, f"{text}:{text}"):
        return f"the values came out as {container.get('imagePullPolicy')!r} and {container.get('image')!r}"
    if any("namespace" in obj["metadata"] for obj in found):
        return "an object names a namespace"
    return ""
