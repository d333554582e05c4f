"""The manifest gate with real helm v4 and the embedded cluster: what it admits, what it refuses.

Why this exists: :mod:`hybrid_operator.helm.gate` sees the manifest through helm's post-renderer, so
its behaviour depends on what helm hands a post-renderer (hooks included, duplicate keys kept) and
on the cluster's discovery. The attacks themselves are in tests/security/test_helm_manifest_gate.py;
these tests pin down the rules: cluster-scoped kinds are allowed, the ``allowCrossNamespace`` opt-out
works, kinds the server does not know count as namespaced, hooks and ``List`` items are checked, and
what helm applies is what the gate saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hybrid_operator.helm import gate_plugin
from hybrid_operator.helm.client import HelmClient, HelmError, HelmErrorKind
from hybrid_operator.helm.gate import ManifestGate, Ticket, discovery
from hybrid_operator.kube.client import ClusterClient
from support.cluster import Cluster, create_namespace, delete_namespaces, find_binary

pytestmark = pytest.mark.integration


def chart(root: Path, name: str, *templates: str) -> Path:
    directory = root / name
    (directory / "templates").mkdir(parents=True)
    (directory / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n")
    for index, template in enumerate(templates):
        (directory / "templates" / f"t{index}.yaml").write_text(template)
    return directory


@contextlib.asynccontextmanager
async def gated(cluster: Cluster) -> AsyncIterator[tuple[HelmClient, ManifestGate]]:
    gate = ManifestGate(discovery(ClusterClient(cluster.kubeconfig)))
    await gate.start()
    try:
        yield HelmClient(find_binary("helm"), cluster.kubeconfig, env=cluster.env(), timeout=60, gate=gate), gate
    finally:
        await gate.close()


def config_map(name: str, namespace: str = "") -> str:
    where = f"\n  namespace: {namespace}" if namespace else ""
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}{where}\ndata:\n  a: b\n"


async def refused(client: HelmClient, cluster: Cluster, chart_dir: Path, **kwargs: bool) -> str:
    with pytest.raises(HelmError) as raised:
        await client.install("r", cluster.namespace, chart_dir, {}, **kwargs)
    assert raised.value.kind is HelmErrorKind.REFUSED, raised.value.message
    assert cluster.helm("list", "-q").stdout.strip() == ""  # no release record either
    return raised.value.message


async def test_cluster_scoped_kinds_and_the_own_namespace_are_admitted(cluster: Cluster, tmp_path: Path) -> None:
    role = f"gate-{uuid.uuid4().hex[:8]}"
    chart_dir = chart(tmp_path, "own", config_map("plain"), config_map("explicit", cluster.namespace),
                      f"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {role}\n"
                      "rules: []\n")
    async with gated(cluster) as (client, _):
        released = await client.install("r", cluster.namespace, chart_dir, {})
    assert released.status == "deployed"
    assert {"plain", "explicit"} <= set(cluster.kubectl("get", "configmap", "-o", "name").stdout.replace(
        "configmap/", "").split())
    cluster.kubectl("get", "clusterrole", role)
    cluster.helm("uninstall", "r")


async def test_another_namespace_is_refused_unless_the_watch_opts_out(cluster: Cluster, session_cluster: Cluster,
                                                                     tmp_path: Path) -> None:
    other = f"gate-other-{uuid.uuid4().hex[:6]}"
    create_namespace(session_cluster, other)
    try:
        chart_dir = chart(tmp_path, "cross", config_map("elsewhere", other))
        async with gated(cluster) as (client, _):
            message = await refused(client, cluster, chart_dir)
            assert f"ConfigMap elsewhere (v1) names namespace {other}, not the resource's namespace " \
                   f"{cluster.namespace}" in message
            assert "allowCrossNamespace: true" in message
            assert cluster.kubectl("get", "configmap", "elsewhere", "-n", other, check=False).returncode != 0
            await client.install("r", cluster.namespace, chart_dir, {}, cross_namespace=True)
        cluster.kubectl("get", "configmap", "elsewhere", "-n", other)
        cluster.helm("uninstall", "r")
    finally:
        delete_namespaces(session_cluster, [other])


async def test_a_kind_the_server_does_not_serve_counts_as_namespaced(cluster: Cluster, tmp_path: Path) -> None:
    widget = "apiVersion: gate.example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: kube-system\n"
    async with gated(cluster) as (client, _):
        message = await refused(client, cluster, chart(tmp_path, "unknown", widget))
    assert "Widget w (gate.example.com/v1) names namespace kube-system" in message
    assert "a kind the API server does not serve (yet), so taken as namespaced" in message


async def test_hooks_and_list_items_are_checked_too(cluster: Cluster, tmp_path: Path) -> None:
    hook = config_map("hooked", "kube-system").replace(
        "metadata:\n", "metadata:\n  annotations:\n    helm.sh/hook: pre-install\n")
    listed = ("apiVersion: v1\nkind: List\nitems:\n"
              "- {apiVersion: v1, kind: ConfigMap, metadata: {name: listed, namespace: kube-system}}\n")
    async with gated(cluster) as (client, _):
        hook_message = await refused(client, cluster, chart(tmp_path, "hook", hook))
        list_message = await refused(client, cluster, chart(tmp_path, "list", listed))
    assert "ConfigMap hooked (v1) names namespace kube-system" in hook_message
    assert "ConfigMap listed (v1) names namespace kube-system" in list_message
    assert cluster.kubectl("get", "configmap", "hooked", "listed", "-n", "kube-system",
                           check=False).stdout.strip() == ""


async def test_duplicate_keys_are_refused_with_the_object_and_the_path(cluster: Cluster, tmp_path: Path) -> None:
    template = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twice\ndata:\n  a: first\n  a: second\n---\n"
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: merged\ndata:\n  base: &base {k: v}\n"
                "  over:\n    <<: *base\n    k: w\n")
    async with gated(cluster) as (client, _):
        message = await refused(client, cluster, chart(tmp_path, "dup", template))
    assert "ConfigMap twice: duplicate key data.a" in message
    assert "ConfigMap merged: duplicate key data.over.k" in message


async def test_upgrades_and_their_dry_runs_go_through_the_gate(cluster: Cluster, tmp_path: Path) -> None:
    chart_dir = chart(tmp_path, "upgrade", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: up\n"
                                           "  namespace: {{ .Values.where | quote }}\ndata:\n  a: b\n")
    async with gated(cluster) as (client, _):
        await client.install("r", cluster.namespace, chart_dir, {"where": cluster.namespace})
        for dry_run in ("client", None):
            with pytest.raises(HelmError) as raised:
                await client.upgrade("r", cluster.namespace, chart_dir, {"where": "kube-system"},
                                     dry_run=dry_run)  # type: ignore[arg-type]
            assert raised.value.kind is HelmErrorKind.REFUSED
    history = json.loads(cluster.helm("history", "r", "-o", "json").stdout)
    assert [(row["revision"], row["status"]) for row in history] == [(1, "deployed")]
    cluster.helm("uninstall", "r")


async def test_what_helm_stores_is_what_the_gate_admitted(cluster: Cluster, tmp_path: Path) -> None:
    """The plugin passes on the bytes it showed the gate: the stored manifest holds the same objects."""
    seen: list[str] = []
    async with gated(cluster) as (client, gate):
        original = gate._verdict

        async def recording(ticket: Ticket, manifest: bytes | None) -> str | None:
            seen.append((manifest or b"").decode())
            return await original(ticket, manifest)

        gate._verdict = recording  # type: ignore[method-assign]
        released = await client.install("r", cluster.namespace, chart(tmp_path, "same", config_map("same")), {})
    assert len(seen) == 1
    assert "name: same" in seen[0] and "name: same" in released.manifest
    cluster.helm("uninstall", "r")


async def test_the_socket_refuses_a_ticket_it_did_not_issue(cluster: Cluster) -> None:
    async with gated(cluster) as (_, gate):
        reader, writer = await asyncio.open_unix_connection(str(gate.socket_path))
        writer.write(b"forged\n" + config_map("x").encode())
        writer.write_eof()
        answer = await reader.read()
        writer.close()
        assert answer.startswith(b"refused: unknown ticket")
        assert gate.socket_path.parent.stat().st_mode & 0o777 == 0o700


def test_the_plugin_refuses_when_the_gate_cannot_be_reached(tmp_path: Path) -> None:
    import subprocess
    import sys

    missing = tmp_path / "none.sock"
    done = subprocess.run([sys.executable, "-I", "-S", gate_plugin.__file__, "t"], input=b"kind: X\n",
                          capture_output=True, env={gate_plugin.SOCKET_ENV: str(missing)}, check=False)
    assert done.returncode == 1 and done.stdout == b""
    assert b"cannot reach the operator's manifest gate" in done.stderr


def test_preview_refuses_what_the_gate_would_refuse(cluster: Cluster, tmp_path: Path) -> None:
    from hybrid_operator.config.model import GroupVersionKind, HelmWatch
    from hybrid_operator.preview.preview import PreviewError, render_chart

    template = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
                "data:\n  size: {{ .Values.size }}\n")
    watch = HelmWatch(gvk=GroupVersionKind("x.example.com", "v1", "X"), chart=chart(tmp_path, "preview", template))
    cr = {"metadata": {"name": "p", "namespace": cluster.namespace},
          "spec": {"size": "1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: out, namespace: kube-system}"}}
    with pytest.raises(PreviewError, match="ConfigMap out \\(v1\\) names namespace kube-system"):
        render_chart(watch, cr, cluster.env(), discovery(ClusterClient(cluster.kubeconfig)))
    cr["spec"] = {"size": "1"}
    assert [obj["metadata"]["name"] for obj in render_chart(watch, cr, cluster.env())] == ["p"]
