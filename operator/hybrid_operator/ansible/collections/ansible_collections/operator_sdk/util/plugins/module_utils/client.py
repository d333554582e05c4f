"""Connection and status helpers shared by the operator_sdk.util modules."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any


def api_client() -> Any:
    """A kubernetes ApiClient from K8S_AUTH_KUBECONFIG / KUBECONFIG, else the in-cluster account."""
    import kubernetes

    path = os.environ.get("K8S_AUTH_KUBECONFIG") or os.environ.get("KUBECONFIG")
    configuration = kubernetes.client.Configuration()
    if path:
        kubernetes.config.load_kube_config(config_file=path, client_configuration=configuration)
    else:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    return kubernetes.client.ApiClient(configuration)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def call(client: Any, method: str, path: str, body: Any = None,
         content_type: str = "application/json") -> Any:
    """One API request; returns the decoded JSON (raises kubernetes ApiException)."""
    import json

    from kubernetes.client.exceptions import ApiException

    headers = {"Accept": "application/json", "Content-Type": content_type}
    method, url, headers, payload, post = client.param_serialize(
        method=method, resource_path=path, header_params=headers, body=body, auth_settings=["BearerToken"])
    response = client.call_api(method, url, header_params=headers, body=payload, post_params=post,
                               _request_timeout=60)
    response.read()
    if not 200 <= int(response.status) < 300:
        raise ApiException(http_resp=response)
    data = response.data
    return json.loads(data) if data else None


def resource_path(client: Any, api_version: str, kind: str, namespace: str | None, name: str) -> tuple[str, bool]:
    """The object's URL path and whether its kind has a status subresource."""
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    listing = call(client, "GET", base)
    resources = listing.get("resources") or []
    names = {r.get("name") for r in resources}
    for resource in resources:
        if resource.get("kind") == kind and "/" not in resource.get("name", ""):
            plural = resource["name"]
            prefix = f"{base}/namespaces/{namespace}" if resource.get("namespaced") and namespace else base
            return f"{prefix}/{plural}/{name}", f"{plural}/status" in names
    raise LookupError(f"kind {kind} is not served in {api_version}")


def merge_conditions(existing: list[dict[str, Any]], updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge conditions by type; lastTransitionTime moves only when status flips."""
    merged = [dict(c) for c in existing]
    for update in updates:
        update = {k: v for k, v in update.items() if v is not None}
        index = next((i for i, c in enumerate(merged) if c.get("type") == update.get("type")), None)
        if index is None:
            update.setdefault("lastTransitionTime", now())
            merged.append(update)
            continue
        old = merged[index]
        same = all(old.get(k) == update.get(k) for k in update if k != "lastTransitionTime")
        if same:
            continue
        if old.get("status") != update.get("status"):
            update.setdefault("lastTransitionTime", now())
        else:
            update.setdefault("lastTransitionTime", old.get("lastTransitionTime", now()))
        merged[index] = update
    return merged
