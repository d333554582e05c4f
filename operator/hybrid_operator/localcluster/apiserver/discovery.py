"""Discovery and OpenAPI documents built from the resource registry.

kubectl and helm refuse to work without an OpenAPI v3 index (they cannot tell
whether the server validates fields), and kopf and the Python client find
kinds only through legacy discovery.  These pure functions render the
documents each client asks for: legacy ``APIVersions``/``APIGroupList``/
``APIResourceList``, aggregated ``APIGroupDiscoveryList`` (v2 and v2beta1), and
an OpenAPI v3 index and per-group-version documents (PATCH paths with
``fieldValidation``, and the kinds' schemas from :mod:`.openapi`) whose hashes
change whenever the registry does.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster.apiserver import openapi
from hybrid_operator.localcluster.resources import Registry, ResourceInfo

SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4+hybrid",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-11-01T00:00:00Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}

SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "scale": ["get", "patch", "update"],
                     "finalize": ["update"]}


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group_entry(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group_entry(name, versions) for name, versions in registry.groups().items() if name]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.groups().get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    infos = sorted(registry.in_group_version(group, version), key=lambda i: i.plural)
    if not infos:
        return None
    resources: list[dict[str, Any]] = []
    for info in infos:
        resources.append({
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": list(info.verbs),
            **_aliases(info),
        })
        for sub in info.subresources:
            sub_kind = "Scale" if sub == "scale" else info.kind
            sub_entry: dict[str, Any] = {"name": f"{info.plural}/{sub}", "singularName": "",
                                         "namespaced": info.namespaced, "kind": sub_kind,
                                         "verbs": SUBRESOURCE_VERBS.get(sub, ["get"])}
            if sub == "scale":
                sub_entry.update(group="autoscaling", version="v1")
            resources.append(sub_entry)
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _aliases(info: ResourceInfo) -> dict[str, list[str]]:
    """``shortNames`` and ``categories``, each only when there are any."""
    found = {"shortNames": list(info.short_names), "categories": list(info.categories)}
    return {key: values for key, values in found.items() if values}


def _discovery_resource(info: ResourceInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": info.plural,
        "responseKind": {"group": info.group, "version": info.version, "kind": info.kind},
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": list(info.verbs),
        **_aliases(info),
    }
    subs = []
    for sub in info.subresources:
        kind = {"group": "autoscaling", "version": "v1", "kind": "Scale"} if sub == "scale" else \
            {"group": info.group, "version": info.version, "kind": info.kind}
        subs.append({"subresource": sub, "responseKind": kind, "verbs": SUBRESOURCE_VERBS.get(sub, ["get"])})
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated(registry: Registry, legacy: bool, api_version: str) -> dict[str, Any]:
    """``APIGroupDiscoveryList`` for ``/api`` (legacy=True) or ``/apis``."""
    items = []
    for group, versions in registry.groups().items():
        if (group == "") != legacy:
            continue
        version_entries = []
        for version in versions:
            infos = sorted(registry.in_group_version(group, version), key=lambda i: i.plural)
            version_entries.append({"version": version, "freshness": "Current",
                                    "resources": [_discovery_resource(info) for info in infos]})
        items.append({"metadata": {"name": group} if group else {}, "versions": version_entries})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}


def openapi_index(registry: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group, versions in registry.groups().items():
        for version in versions:
            prefix = f"api/{version}" if not group else f"apis/{group}/{version}"
            paths[prefix] = {
                "serverRelativeURL": f"/openapi/v3/{prefix}?hash={registry.fingerprint(group, version)}"
            }
    return {"paths": paths}


def _patch_operation(info: ResourceInfo) -> dict[str, Any]:
    content = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
    if not info.custom:
        content.insert(2, "application/strategic-merge-patch+json")
    return {
        "x-kubernetes-group-version-kind": {"group": info.group, "version": info.version, "kind": info.kind},
        "x-kubernetes-action": "patch",
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
            {"name": "force", "in": "query", "schema": {"type": "boolean"}},
        ],
        "requestBody": {"content": {ct: {"schema": {"type": "object"}} for ct in content}},
        "responses": {"200": {"description": "OK"}},
    }


def openapi_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    infos = registry.in_group_version(group, version)
    if not infos:
        return None
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    paths: dict[str, Any] = {}
    for info in sorted(infos, key=lambda i: i.plural):
        scope = f"{base}/namespaces/{{namespace}}/{info.plural}" if info.namespaced else f"{base}/{info.plural}"
        paths[f"{scope}/{{name}}"] = {"patch": _patch_operation(info)}
        for sub in info.subresources:
            paths[f"{scope}/{{name}}/{sub}"] = {"patch": _patch_operation(info)}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": openapi.components(sorted(infos, key=lambda i: i.plural))},
    }
