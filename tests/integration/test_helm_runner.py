"""hybrid_operator.runners.helm against real helm v4 and the embedded cluster.

Why this exists: the Helm reconciler trusts this adapter for the release state and for helm's v4
flags (``--reset-values``, ``--dry-run=client``, labels, ``--force-replace --server-side=false``),
its timeouts and its error classes.  Each test drives the real helm binary over HTTPS.
"""

from __future__ import annotations

import base64
import gzip
import json
import stat
from pathlib import Path

import pytest
import yaml

from hybrid_operator.helm import client as helm
from hybrid_operator.helm.client import ActionOptions, HelmClient, HelmError, HelmErrorKind
from support.cluster import REPO, Cluster, find_binary

pytestmark = pytest.mark.integration

DEMO = Path(__file__).resolve().parent / "charts" / "demo"
MEMCACHED = REPO / "charts" / "memcached"


def client(cluster: Cluster, **kwargs: float) -> HelmClient:
    return HelmClient(find_binary("helm"), cluster.kubeconfig, env=cluster.env(), timeout=60, **kwargs)


def write_chart(root: Path, name: str, template: str) -> Path:
    chart = root / name
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(template)
    return chart


def release_secret(cluster: Cluster, name: str, revision: int) -> dict[str, object]:
    return dict(cluster.get_json("secret", f"sh.helm.release.v1.{name}.v{revision}", "-n", cluster.namespace))


def craft_pending(cluster: Cluster, name: str, revision: int, state: str) -> None:
    """Copy a release revision as ``revision + 1`` in ``state``, as a helm process killed mid-upgrade leaves it."""
    secret = release_secret(cluster, name, revision)
    release = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))  # type: ignore[index]
    release["version"] = revision + 1
    release["info"]["status"] = state
    encoded = base64.b64encode(gzip.compress(json.dumps(release).encode())).decode()
    labels = {**secret["metadata"]["labels"], "status": state, "version": str(revision + 1)}  # type: ignore[index]
    document = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                "metadata": {"name": f"sh.helm.release.v1.{name}.v{revision + 1}", "namespace": cluster.namespace,
                             "labels": labels},
                "stringData": {"release": encoded}}
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(document))


@pytest.mark.parametrize(("stderr", "kind"), [
    ("Error: release: not found", HelmErrorKind.NOT_FOUND),
    ('Error: UPGRADE FAILED: "x" has no deployed releases', HelmErrorKind.NOT_FOUND),
    ("Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress", HelmErrorKind.IN_PROGRESS),
    ('Error: kubernetes cluster unreachable: Get "https://127.0.0.1:1/version": dial tcp 127.0.0.1:1: connect: '
     "connection refused", HelmErrorKind.UNREACHABLE),
    ("Error: INSTALLATION FAILED: execution error at (bad/templates/cm.yaml:6:11): size is required",
     HelmErrorKind.RENDER),
    ("Error: INSTALLATION FAILED: parse error at (bad/templates/cm.yaml:2): unexpected }}", HelmErrorKind.RENDER),
    ("Error: INSTALLATION FAILED: unable to build kubernetes objects from release manifest: x",
     HelmErrorKind.RENDER),
    ('Error: UPGRADE FAILED: x/templates/cm.yaml:6:39\n  executing "x/templates/cm.yaml" at <"default">:\n'
     "    nil pointer evaluating interface {}.name", HelmErrorKind.RENDER),
    ("Error: UPGRADE FAILED: cannot patch \"x\" with kind Deployment: field is immutable", HelmErrorKind.OTHER),
])
def test_classify(stderr: str, kind: HelmErrorKind) -> None:
    assert helm.classify(stderr) is kind


def test_error_message_drops_prefix_and_log_lines() -> None:
    stderr = 'level=WARN msg="upgrade failed" name=r2\nError: UPGRADE FAILED: boom\n'
    assert helm.error_message(stderr) == "UPGRADE FAILED: boom"


async def test_install_reads_and_upgrade_with_reset_values(shared_cluster: Cluster) -> None:
    h = client(shared_cluster)
    ns = shared_cluster.namespace
    installed = await h.install("alpha", ns, MEMCACHED, {"size": 2},
                                ActionOptions(labels={"hybrid-operator.dev/inputs": "abc-r1"}, description="first"))
    assert (installed.revision, installed.status) == (1, "deployed")
    assert "replicas: 2" in installed.manifest and "runs 2 replica(s)" in installed.notes
    info = await h.info("alpha", ns)
    assert (info.revision, info.status, info.chart, info.apply_method) == (1, "deployed", "memcached", "ssa")
    assert info.labels["hybrid-operator.dev/inputs"] == "abc-r1"
    assert await h.manifest("alpha", ns) == installed.manifest
    assert [(r.revision, r.status, r.description) for r in await h.history("alpha", ns)] == \
        [(1, "deployed", "first")]

    candidate = await h.upgrade("alpha", ns, MEMCACHED, {"size": 2}, dry_run="client")
    assert candidate.manifest == installed.manifest
    assert len(await h.history("alpha", ns)) == 1, "a dry-run makes no revision"

    # empty values really reset to the chart's defaults (no --reuse-values behaviour)
    upgraded = await h.upgrade("alpha", ns, MEMCACHED, {})
    assert upgraded.revision == 2 and "replicas: 1" in upgraded.manifest
    assert shared_cluster.get_json("deployment", "alpha")["spec"]["replicas"] == 1
    assert await h.manifest("alpha", ns, 1) == installed.manifest
    assert await h.uninstall("alpha", ns) is True
    assert await h.uninstall("alpha", ns) is False


async def test_errors_are_classified(shared_cluster: Cluster, tmp_path: Path) -> None:
    h = client(shared_cluster)
    ns = shared_cluster.namespace
    with pytest.raises(HelmError) as missing:
        await h.info("nothing-here", ns)
    assert missing.value.kind is HelmErrorKind.NOT_FOUND

    bad = write_chart(tmp_path, "bad", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
                                       "data:\n  size: {{ required \"size is required\" .Values.size | quote }}\n")
    with pytest.raises(HelmError) as render:
        await h.install("beta", ns, bad, {})
    assert render.value.kind is HelmErrorKind.RENDER
    assert "size is required" in render.value.message and not render.value.message.startswith("Error:")

    await h.install("beta", ns, bad, {"size": 1})
    craft_pending(shared_cluster, "beta", 1, "pending-upgrade")
    with pytest.raises(HelmError) as busy:
        await h.upgrade("beta", ns, bad, {"size": 2}, dry_run="client")
    assert busy.value.kind is HelmErrorKind.IN_PROGRESS
    await h.rollback("beta", ns, 1)
    assert [(r.revision, r.status) for r in await h.history("beta", ns)] == \
        [(1, "superseded"), (2, "pending-upgrade"), (3, "deployed")]

    config = yaml.safe_load(shared_cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable = tmp_path / "unreachable"
    unreachable.write_text(yaml.safe_dump(config))
    with pytest.raises(HelmError) as down:
        await HelmClient(find_binary("helm"), unreachable, env=shared_cluster.env()).info("beta", ns)
    assert down.value.kind is HelmErrorKind.UNREACHABLE


async def test_force_maps_to_force_replace_with_client_side_apply(shared_cluster: Cluster) -> None:
    h = client(shared_cluster)
    ns = shared_cluster.namespace
    await h.install("gamma", ns, DEMO, {})
    forced = await h.upgrade("gamma", ns, DEMO, {"replicas": 2}, ActionOptions(force=True))
    assert forced.status == "deployed"
    assert (await h.info("gamma", ns)).apply_method == "csa"
    await h.rollback("gamma", ns, 1, ActionOptions(force=True))
    assert [r.status for r in await h.history("gamma", ns)] == ["superseded", "superseded", "deployed"]
    assert shared_cluster.get_json("deployment", "gamma-web")["spec"]["replicas"] == 1


async def test_history_max_bounds_revisions(shared_cluster: Cluster) -> None:
    h = client(shared_cluster, history_max=2)
    ns = shared_cluster.namespace
    await h.install("delta", ns, DEMO, {})
    for replicas in (2, 3, 4):
        await h.upgrade("delta", ns, DEMO, {"replicas": replicas})
    assert [r.revision for r in await h.history("delta", ns)] == [3, 4]


async def test_a_hanging_helm_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    fake = tmp_path / "helm"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    h = HelmClient(str(fake), tmp_path / "kubeconfig", timeout=0, grace=0.5)
    with pytest.raises(HelmError) as timed_out:
        await h.history("x", "default")
    assert timed_out.value.kind is HelmErrorKind.TIMEOUT
    assert "did not finish within 0s" in timed_out.value.message


async def test_chart_digest_and_show_chart(shared_cluster: Cluster, tmp_path: Path) -> None:
    chart = write_chart(tmp_path, "dig", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    first = helm.chart_digest(chart)
    assert first == helm.chart_digest(chart)
    (chart / "templates" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\n")
    assert helm.chart_digest(chart) != first
    assert (await client(shared_cluster).show_chart(MEMCACHED))["name"] == "memcached"


async def test_server_dry_run_lets_lookup_see_the_cluster(shared_cluster: Cluster, tmp_path: Path) -> None:
    h = client(shared_cluster)
    ns = shared_cluster.namespace
    chart = write_chart(tmp_path, "looker", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: looker\ndata:\n"
                                            "  {{- $ns := lookup \"v1\" \"Namespace\" \"\" \"default\" }}\n"
                                            "  seen: {{ if $ns }}{{ $ns.metadata.name | quote }}{{ else }}\"nothing\""
                                            "{{ end }}\n")
    installed = await h.install("looker", ns, chart, {})
    assert 'seen: "default"' in installed.manifest
    client_side = await h.upgrade("looker", ns, chart, {}, dry_run="client")
    server_side = await h.upgrade("looker", ns, chart, {}, dry_run="server")
    assert 'seen: "nothing"' in client_side.manifest
    assert server_side.manifest == installed.manifest
