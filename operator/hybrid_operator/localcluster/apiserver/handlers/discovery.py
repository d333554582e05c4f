"""The endpoints that are not about objects: version, health, discovery and OpenAPI.

Discovery answers in the legacy form (``APIVersions``, ``APIGroupList``,
``APIGroup``, ``APIResourceList``) or, when the Accept header asks for it,
as aggregated discovery (``APIGroupDiscoveryList``, v2 or v2beta1), which
kubectl 1.30+ prefers.  The documents themselves come from :mod:`..discovery`.
"""

from __future__ import annotations

import json

from aiohttp import web

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import discovery, encoding, openapi
from hybrid_operator.localcluster.apiserver.context import api_of, config_of

AGGREGATED = "{json};g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"


def _aggregated_version(request: web.Request) -> str | None:
    """``v2`` or ``v2beta1`` when the Accept header asks for aggregated discovery."""
    accept = request.headers.get("Accept", "")
    for part in accept.split(","):
        if "as=APIGroupDiscoveryList" in part and "g=apidiscovery.k8s.io" in part:
            if "v=v2beta1" in part:
                return "v2beta1"
            if "v=v2" in part:
                return "v2"
    return None


def _aggregated(request: web.Request, legacy: bool) -> web.Response | None:
    wanted = _aggregated_version(request)
    if not wanted:
        return None
    body = discovery.aggregated(api_of(request).registry, legacy, f"apidiscovery.k8s.io/{wanted}")
    return encoding.respond(body, content_type=AGGREGATED.format(json=encoding.JSON, version=wanted))


async def version(request: web.Request) -> web.Response:
    return encoding.respond(discovery.SERVER_VERSION)


async def health(request: web.Request) -> web.Response:
    response = web.Response(text="ok")
    response.headers["Content-Type"] = "text/plain; charset=utf-8"
    return response


async def core_root(request: web.Request) -> web.Response:
    """``/api``."""
    return _aggregated(request, True) or encoding.respond(discovery.api_versions(config_of(request).address))


async def groups_root(request: web.Request) -> web.Response:
    """``/apis``."""
    return _aggregated(request, False) or encoding.respond(discovery.api_group_list(api_of(request).registry))


async def group(request: web.Request, name: str) -> web.Response:
    """``/apis/<group>``."""
    found = discovery.api_group(api_of(request).registry, name)
    if found is None:
        raise errors.path_not_found()
    return encoding.respond(found)


async def resources(request: web.Request, group: str, version: str) -> web.Response:
    """``/api/v1`` and ``/apis/<group>/<version>``."""
    listed = discovery.api_resource_list(api_of(request).registry, group, version)
    if listed is None:
        raise errors.path_not_found()
    return encoding.respond(listed)


async def openapi_v3_index(request: web.Request) -> web.Response:
    return encoding.respond(discovery.openapi_index(api_of(request).registry))


_documents: dict[tuple[str, str], tuple[str, bytes]] = {}  # (group, version) -> (fingerprint, serialized)


async def openapi_v3_document(request: web.Request) -> web.Response:
    """One group/version's document, serialized once per registry fingerprint (it is large)."""
    parts = request.match_info["tail"].split("/")
    registry = api_of(request).registry
    if len(parts) == 2 and parts[0] == "api":
        group, version = "", parts[1]
    elif len(parts) == 3 and parts[0] == "apis":
        group, version = parts[1], parts[2]
    else:
        raise errors.path_not_found()
    fingerprint = registry.fingerprint(group, version)
    cached = _documents.get((group, version))
    if cached is None or cached[0] != fingerprint:
        doc = discovery.openapi_document(registry, group, version)
        if doc is None:
            raise errors.path_not_found()
        cached = (fingerprint, json.dumps(doc, separators=(",", ":")).encode())
        _documents[(group, version)] = cached
    response = web.Response(body=cached[1], content_type="application/json")
    return response


async def openapi_v2(request: web.Request) -> web.Response:
    """An empty OpenAPI v2 document (see :mod:`..openapi`: kubectl needs one to apply a ``kind: List``)."""
    response = web.Response(body=b"")
    response.headers["Content-Type"] = openapi.V2_CONTENT_TYPE
    return response
