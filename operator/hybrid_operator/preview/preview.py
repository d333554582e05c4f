"""``hybrid-operator preview -f cr.yaml``: what applying a custom resource would change, changing nothing.

For an Ansible kind the playbook or role runs in check-and-diff mode (``--check --diff``) against
the real cluster through :class:`~hybrid_operator.preview_guard.DryRunGuard`, which answers reads
of the previewed resource from the file and sends any write with ``dryRun=All``; the Kubernetes
modules' results (method, diff) become the list of objects that would be created, changed or
deleted. For a Helm kind the chart is rendered (``helm template``) with the values the operator
would use (the CR's spec plus ``overrideValues``) and each object is compared with the live one
(only the fields the chart sets), objects of the live release the chart no longer renders being
deletions; a render the operator's manifest gate would refuse (:mod:`hybrid_operator.helm.manifestcheck`)
is an error, as the operator would apply nothing. Exit codes: 0 nothing would change, 1 something
would, 2 error (bad file, unknown kind, failed task, helm error, refused manifest).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from hybrid_operator import errors
from hybrid_operator.config import manifest_yaml, model, watches
from hybrid_operator.helm import manifestcheck
from hybrid_operator.helm import values as helm_values
from hybrid_operator.helm.gate import discovery
from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ClusterClient, ResourceRef
from hybrid_operator.preview.guard import DryRunGuard

NOTHING, CHANGES, ERROR = 0, 1, 2
Action = Literal["create", "update", "delete", "status", "task"]
SYMBOLS = {"create": "+", "update": "~", "delete": "-", "status": "~", "task": "?"}


class PreviewError(errors.ConfigurationError):
    """The preview could not be computed (exit code 2)."""


@dataclass(frozen=True)
class Change:
    """One object the reconcile would create, update or delete (or a status/other task change)."""

    action: Action
    api_version: str
    kind: str
    namespace: str
    name: str
    before: Any = None
    after: Any = None

    @property
    def title(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{SYMBOLS[self.action]} {self.action} {self.api_version} {self.kind} {where}"


def unified(before: Any, after: Any) -> str:
    """A unified diff of two objects as YAML (empty when equal)."""
    old = manifest_yaml.dump(before).splitlines(keepends=True) if before not in (None, {}) else []
    new = manifest_yaml.dump(after).splitlines(keepends=True) if after not in (None, {}) else []
    return "".join(difflib.unified_diff(old, new, "live", "preview"))


def report(changes: list[Change]) -> str:
    if not changes:
        return "no changes: applying this resource would not change the cluster\n"
    lines = []
    for change in changes:
        lines.append(change.title + "\n")
        lines += [f"    {line}" for line in unified(change.before, change.after).splitlines(keepends=True)]
    counts = {action: sum(1 for c in changes if c.action == action) for action in ("create", "update", "delete")}
    lines.append(f"{len(changes)} change(s): {counts['create']} to create, {counts['update']} to update, "
                 f"{counts['delete']} to delete\n")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


# -- the resource and its watch ------------------------------------------------------------------------


def read_cr(path: Path, namespace: str | None) -> dict[str, Any]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise PreviewError(f"cannot read {path}: {exc}") from exc
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise PreviewError(f"{path}: expected exactly one custom resource, found {len(documents)} documents")
    cr = documents[0]
    metadata: dict[str, Any] = cr["metadata"] if isinstance(cr.get("metadata"), dict) else {}
    if not isinstance(cr.get("apiVersion"), str) or not isinstance(cr.get("kind"), str) or not metadata.get("name"):
        raise PreviewError(f"{path}: a custom resource needs apiVersion, kind and metadata.name")
    cr["metadata"] = {**metadata, "namespace": namespace or metadata.get("namespace") or "default"}
    return cr


def find_watch(loaded: list[model.Watch], cr: dict[str, Any]) -> model.Watch:
    for watch in loaded:
        if watch.gvk.api_version == cr["apiVersion"] and watch.gvk.kind == cr["kind"]:
            return watch
    kinds = ", ".join(str(w.gvk) for w in loaded)
    raise PreviewError(f"{cr['apiVersion']} {cr['kind']} is not in the watches file (it has: {kinds})")


def merged_cr(cr: dict[str, Any], live: dict[str, Any] | None) -> dict[str, Any]:
    """The resource as it would be after applying the file: the live one with the file's spec and labels."""
    if live is None:
        return cr
    overrides = {key: value for key, value in cr["metadata"].items() if key in ("labels", "annotations")}
    metadata = {**live.get("metadata", {}), **overrides}
    return {**live, "metadata": metadata, "spec": cr.get("spec", {})}


# -- Ansible kinds ---------------------------------------------------------------------------------------


def job_events(artifact_dir: Path | None) -> list[dict[str, Any]]:
    if artifact_dir is None or not (artifact_dir / "job_events").is_dir():
        return []
    events = [json.loads(p.read_text(encoding="utf-8")) for p in (artifact_dir / "job_events").glob("*.json")]
    return sorted(events, key=lambda event: int(event.get("counter", 0)))


def _identity(value: Any) -> tuple[str, str, str, str]:
    obj: dict[str, Any] = value if isinstance(value, dict) else {}
    return str(obj.get("apiVersion", "")), str(obj.get("kind", "")), objects.namespace(obj), objects.name(obj)


NOISE = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp")


def without_noise(obj: Any) -> Any:
    """``obj`` without the server-maintained metadata that changes on every write."""
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return obj
    metadata = {key: value for key, value in obj["metadata"].items() if key not in NOISE}
    cleaned = {key: value for key, value in obj.items() if key != "metadata"}
    return {**cleaned, "metadata": metadata} if metadata else cleaned


def change_of(event: dict[str, Any], cr: dict[str, Any]) -> Change | None:
    """The change a ``runner_on_ok`` event reports, None when the task changes nothing."""
    data: dict[str, Any] = event.get("event_data") or {}
    res: dict[str, Any] = data.get("res") or {}
    if event.get("event") != "runner_on_ok" or not res.get("changed"):
        return None
    action = str(data.get("task_action") or data.get("resolved_action") or "")
    if action.endswith("k8s_status"):
        return _status_change(res, cr)
    if "method" in res:
        return _object_change(res)
    return Change("task", "", f"task {data.get('task', '?')!r} ({action})", "", "would report a change")


def _status_change(res: dict[str, Any], cr: dict[str, Any]) -> Change:
    """What ``operator_sdk.util.k8s_status`` would write into the CR's status."""
    args = (res.get("invocation") or {}).get("module_args") or {}
    before = ((res.get("result") or {}).get("status")) or {}
    after = {**before, **(args.get("status") or {})}
    api, kind, namespace, name = _identity(cr)
    return Change("status", api, kind, namespace, name, {"status": before}, {"status": after})


def _object_change(res: dict[str, Any]) -> Change:
    """What a ``kubernetes.core.k8s`` task would create, update or delete (its ``method`` and ``diff``)."""
    diff: dict[str, Any] = res["diff"] if isinstance(res.get("diff"), dict) else {}
    result = res.get("result")
    method = str(res["method"])
    verb: Action = "create" if method == "create" else "delete" if method == "delete" else "update"
    api, kind, namespace, name = _identity(result if verb != "delete" else diff.get("before") or result)
    old = None if verb == "create" else diff.get("before")
    new = result if verb == "create" else None if verb == "delete" else diff.get("after")
    return Change(verb, api, kind, namespace, name, without_noise(old), without_noise(new))


async def preview_ansible(watch: model.AnsibleWatch, cr: dict[str, Any], cluster: ClusterClient,
                          ref: ResourceRef, project_dir: Path) -> list[Change]:
    from hybrid_operator.ansible import extravars
    from hybrid_operator.ansible.environment import ansible_env
    from hybrid_operator.ansible.runner import AnsibleRunner
    from hybrid_operator.ansible.runs import RunRequest
    from hybrid_operator.config import automation
    from hybrid_operator.config.settings import Settings

    refused = extravars.refusals(cr, watch, automation.own_variables(watch, project_dir, dict(os.environ)))
    if refused:  # the operator would refuse this spec before running anything (docs/security.md)
        raise PreviewError("the operator would refuse this resource and run nothing: " + "; ".join(refused))
    meta = cr["metadata"]
    connection = cluster.connection()
    guard = DryRunGuard(connection, {ref.path(meta["namespace"], meta["name"]): cr})
    runner = AnsibleRunner(max_workers=1, timeout=900, project_dir=project_dir, mode="cold")  # one run: no worker
    await guard.start()
    try:
        with tempfile.TemporaryDirectory(prefix="hybrid-operator-preview-") as scratch:
            kubeconfig = guard.write_kubeconfig(Path(scratch) / "kubeconfig", meta["namespace"])
            request = RunRequest(cr=cr, watch=watch, artifacts_root=Path(scratch) / "runner", kubeconfig=kubeconfig,
                                 ansible_args=("--check", "--diff"), max_artifacts=0,
                                 env=ansible_env(Settings(environ=dict(os.environ))))
            result = await runner.run(request)
            events = job_events(result.artifact_dir)
    finally:
        await runner.close()
        await guard.stop()
    if not result.succeeded:
        raise PreviewError(f"the {watch.gvk.kind} automation failed in check mode: "
                           f"{result.failure_message or 'no result'}")
    changes = [change for event in events if (change := change_of(event, cr)) is not None]
    changes += [Change("task", "", f"{method} {path}", "", "a write without dryRun (sent with dryRun=All)")
                for method, path in guard.writes]
    return changes


# -- Helm kinds ------------------------------------------------------------------------------------------


def projected(live: Any, desired: Any) -> Any:
    """``live`` reduced to the fields ``desired`` sets (server defaults and status left out)."""
    if isinstance(desired, dict) and isinstance(live, dict):
        return {key: projected(live[key], value) for key, value in desired.items() if key in live}
    if isinstance(desired, list) and isinstance(live, list) and len(desired) == len(live):
        return [projected(item, wanted) for item, wanted in zip(live, desired, strict=True)]
    return live


def manifest_objects(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for document in yaml.safe_load_all(text):
        if isinstance(document, dict) and document.get("kind") == "List":
            found += [item for item in document.get("items") or [] if isinstance(item, dict)]
        elif isinstance(document, dict):
            found.append(document)
    return found


def _helm(args: list[str], environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    from hybrid_operator.helm.client import find_helm

    binary = find_helm(environ)
    if binary is None:
        raise PreviewError("helm not found: install helm v4 or set HELM_BINARY")
    return subprocess.run([binary, *args], capture_output=True, text=True, env=environ, timeout=300, check=False)


def render_chart(watch: model.HelmWatch, cr: dict[str, Any], environ: dict[str, str],
                 namespaced: manifestcheck.Namespaced | None = None) -> list[dict[str, Any]]:
    """The objects ``helm template`` renders for ``cr``; PreviewError when helm fails, or when the operator's
    manifest gate would refuse them (``namespaced``: the cluster's discovery; None: every kind namespaced)."""
    meta = cr["metadata"]
    values = helm_values.compose(cr.get("spec"), watch.override_values).values
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="preview-values-") as handle:
        json.dump(values, handle)
        handle.flush()
        rendered = _helm(["template", meta["name"], str(watch.chart), "--namespace", meta["namespace"],
                          "--values", handle.name], environ)
    if rendered.returncode != 0:
        raise PreviewError(f"helm could not render {watch.chart} with this resource's values: "
                           f"{rendered.stderr.strip()}")
    refusals = manifestcheck.refusals(rendered.stdout, meta["namespace"], cross_namespace=watch.allow_cross_namespace,
                                      namespaced=namespaced or (lambda api_version, kind: True))
    if refusals:
        raise PreviewError("the operator would refuse the rendered manifest and apply nothing: "
                           + manifestcheck.summary(refusals))
    return manifest_objects(rendered.stdout)


def release_objects(cr: dict[str, Any], kubeconfig: Path, environ: dict[str, str]) -> list[dict[str, Any]]:
    meta = cr["metadata"]
    found = _helm(["get", "manifest", meta["name"], "--namespace", meta["namespace"], "--kubeconfig",
                   str(kubeconfig)], environ)
    return manifest_objects(found.stdout) if found.returncode == 0 else []


def _located(cluster: ClusterClient, obj: dict[str, Any], namespace: str) -> tuple[ResourceRef, str]:
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    try:
        ref = cluster.resolve(group, version, str(obj.get("kind", "")))
    except errors.HybridOperatorError as exc:
        raise PreviewError(f"{obj.get('apiVersion')} {obj.get('kind')}: {exc}") from exc
    return ref, (objects.meta(obj).get("namespace") or namespace) if ref.namespaced else ""


def preview_helm(watch: model.HelmWatch, cr: dict[str, Any], cluster: ClusterClient,
                 kubeconfig: Path) -> list[Change]:
    environ = dict(os.environ)
    namespace = cr["metadata"]["namespace"]
    rendered = render_chart(watch, cr, environ, discovery(cluster))
    changes: list[Change] = []
    seen = set()
    for obj in rendered:
        ref, obj_namespace = _located(cluster, obj, namespace)
        api, kind, _, name = _identity(obj)
        seen.add((api, kind, obj_namespace, name))
        live = cluster.get(ref, obj_namespace, name)
        if live is None:
            changes.append(Change("create", api, kind, obj_namespace, name, None, obj))
        elif (before := projected(live, obj)) != obj:
            changes.append(Change("update", api, kind, obj_namespace, name, before, obj))
    for obj in release_objects(cr, kubeconfig, environ):
        ref, obj_namespace = _located(cluster, obj, namespace)
        api, kind, _, name = _identity(obj)
        live = cluster.get(ref, obj_namespace, name)
        if (api, kind, obj_namespace, name) not in seen and live is not None:
            changes.append(Change("delete", api, kind, obj_namespace, name, projected(live, obj), None))
    return changes


# -- entry point -----------------------------------------------------------------------------------------


def with_creation(cr: dict[str, Any], changes: list[Change]) -> list[Change]:
    """A resource not in the cluster yet: applying the file creates it, first of all.

    The status its reconcile would write (``k8s_status`` changes of the resource itself) is shown as
    part of what is created, not as a diff of a status that does not exist.
    """
    identity = _identity(cr)
    status: dict[str, Any] = {}
    rest = []
    for change in changes:
        if change.action == "status" and (change.api_version, change.kind, change.namespace, change.name) == identity:
            status.update((change.after or {}).get("status") or {})
        else:
            rest.append(change)
    created = {key: value for key, value in cr.items() if key != "status"}
    if status:
        created["status"] = status
    return [Change("create", *identity, None, created), *rest]


def compute(filename: Path, watches_file: Path, kubeconfig: Path, namespace: str | None) -> list[Change]:
    cr = read_cr(filename, namespace)
    watch = find_watch(watches.load(watches_file), cr)
    cluster = ClusterClient(kubeconfig)
    try:
        ref = cluster.resolve(watch.gvk.group, watch.gvk.version, watch.gvk.kind)
    except errors.HybridOperatorError as exc:
        raise PreviewError(f"{watch.gvk} is not served by the cluster (is its CRD installed?): {exc}") from exc
    meta = cr["metadata"]
    live = cluster.get(ref, meta["namespace"], meta["name"])
    if isinstance(watch, model.HelmWatch):
        changes = preview_helm(watch, cr, cluster, kubeconfig)
    else:
        changes = asyncio.run(preview_ansible(watch, merged_cr(cr, live), cluster, ref,
                                              watches_file.absolute().parent))
    return changes if live is not None else with_creation(cr, changes)


#: what ``make run`` (``hybrid-operator up``) writes, relative to the project: the fallback cluster
LOCAL_KUBECONFIG = Path(".hybrid/kubeconfig")


def kubeconfig_for(given: Path | None, environ: dict[str, str]) -> Path | None:
    """``--kubeconfig``, else ``$KUBECONFIG``, else the local cluster's ``.hybrid/kubeconfig`` when it exists."""
    if given is not None:
        return given
    if environ.get("KUBECONFIG"):
        return Path(environ["KUBECONFIG"])
    return LOCAL_KUBECONFIG if LOCAL_KUBECONFIG.is_file() else None


def main(filename: Path, watches_file: Path, kubeconfig: Path | None, namespace: str | None) -> int:
    """Print what applying ``filename`` would change; 0 nothing, 1 changes, 2 error."""
    config = kubeconfig_for(kubeconfig, dict(os.environ))
    try:
        if config is None:
            raise PreviewError("no cluster: pass --kubeconfig, set KUBECONFIG, or start the local cluster "
                               f"(`make run` writes {LOCAL_KUBECONFIG})")
        changes = compute(filename, watches_file, config, namespace)
    except errors.ConfigurationError as exc:
        print(f"hybrid-operator preview: {exc}", file=sys.stderr)
        return ERROR
    except errors.HybridOperatorError as exc:
        print(f"hybrid-operator preview: {exc}", file=sys.stderr)
        return ERROR
    sys.stdout.write(report(changes))
    return CHANGES if changes else NOTHING
