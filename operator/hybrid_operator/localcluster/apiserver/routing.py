"""Routing a resource request to its verb's handler, as kube-apiserver's API installer does.

``/api/v1/...`` and ``/apis/<group>/<version>/...`` either name a discovery
document (group, group/version) or a resource (see :mod:`.urls`).  For a
resource, GET reads one object, or lists or watches a collection; every
other method is a write, whose query options are decoded first, then handed
to the handler for a named object or for a collection; a method that has no
handler for the target is 405 MethodNotAllowed.  The create-only review
kinds (access reviews, token reviews) go to their own handler.  Every resource request is
recorded in the audit log, when there is one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import decoding
from hybrid_operator.localcluster.apiserver.audit import rbac_verb
from hybrid_operator.localcluster.apiserver.context import api_of, config_of
from hybrid_operator.localcluster.apiserver.handlers import discovery
from hybrid_operator.localcluster.apiserver.handlers.create import create_resource
from hybrid_operator.localcluster.apiserver.handlers.delete import delete_collection, delete_resource
from hybrid_operator.localcluster.apiserver.handlers.get import get_resource
from hybrid_operator.localcluster.apiserver.handlers.list import list_resources
from hybrid_operator.localcluster.apiserver.handlers.patch import patch_resource
from hybrid_operator.localcluster.apiserver.handlers.reviews import review
from hybrid_operator.localcluster.apiserver.handlers.update import update_resource
from hybrid_operator.localcluster.apiserver.handlers.watch import watch_resources
from hybrid_operator.localcluster.apiserver.urls import Target, resolve
from hybrid_operator.localcluster.resources import CREATE_ONLY
from hybrid_operator.localcluster.semantics.writes import WriteOptions

Write = Callable[[web.Request, Target, WriteOptions], Awaitable[web.StreamResponse]]

# Per method: the handler for a named object and the one for a collection (None: 405).
WRITES: dict[str, tuple[Write | None, Write | None]] = {
    "POST": (None, create_resource),
    "PUT": (update_resource, None),
    "PATCH": (patch_resource, None),
    "DELETE": (delete_resource, delete_collection),
}


async def core_resources(request: web.Request) -> web.StreamResponse:
    """``/api/v1`` and everything below it."""
    tail = request.match_info.get("tail", "")
    if not tail:
        return await discovery.resources(request, "", "v1")
    return await dispatch(request, resolve(api_of(request).registry, "", "v1", tail.split("/")))


async def group_resources(request: web.Request) -> web.StreamResponse:
    """``/apis/<group>``, ``/apis/<group>/<version>`` and everything below them."""
    group = request.match_info["group"]
    version = request.match_info.get("version", "")
    tail = request.match_info.get("tail", "")
    if not version:
        return await discovery.group(request, group)
    if not tail:
        return await discovery.resources(request, group, version)
    return await dispatch(request, resolve(api_of(request).registry, group, version, tail.split("/")))


NO_CONTAINERS = {
    "exec": "exec is not available", "attach": "attach is not available",
    "portforward": "port-forward is not available", "log": "logs are not available",
    "proxy": "proxying to pods and services is not available",
    "ephemeralcontainers": "ephemeral containers are not available", "eviction": "evictions are not available",
}


async def dispatch(request: web.Request, target: Target) -> web.StreamResponse:
    _audit(request, target)
    if target.info.verbs == CREATE_ONLY:
        return await review(request, target)
    if target.subresource in NO_CONTAINERS and target.subresource not in target.info.subresources:
        api_of(request).get(target.info, target.namespace or "", target.name)  # 404 for a missing object
        raise errors.bad_request(f"this embedded cluster runs no containers: {NO_CONTAINERS[target.subresource]} "
                                 f"({target.info.plural}/{target.subresource} of {target.name!r})")
    if request.method == "GET":
        return await _read(request, target)
    opts = decoding.write_options(request)
    named, collection = WRITES.get(request.method, (None, None))
    handler = named if target.name else collection
    if handler is None:
        raise errors.method_not_allowed()
    return await handler(request, target, opts)


async def _read(request: web.Request, target: Target) -> web.StreamResponse:
    if target.name:
        return await get_resource(request, target)
    labels, fields = decoding.selectors(request, target.info)
    decoding.timeout_seconds(request)  # a LIST decodes it too: a malformed one is a 400 either way
    watching = decoding.parse_bool(request.query.get("watch"), "watch")
    if not watching:
        decoding.limit(request)
    # the shard selector is parsed by the storage layer, after every query option decoded (its 500 comes last)
    shard = decoding.shard_selector(request, config_of(request).sharded_list_watch)
    if watching:
        return await watch_resources(request, target, labels, fields, shard)
    return await list_resources(request, target, labels, fields, shard)


def _audit(request: web.Request, target: Target) -> None:
    audit = config_of(request).audit
    if audit is None:
        return
    watch = request.method == "GET" and decoding.is_true(request.query.get("watch", ""))
    audit.record({
        "verb": rbac_verb(request.method, bool(target.name), watch),
        "group": target.info.group,
        "resource": target.info.plural + (f"/{target.subresource}" if target.subresource else ""),
        "namespace": target.namespace or "",
        "name": target.name,
        "userAgent": request.headers.get("User-Agent", ""),
    })
