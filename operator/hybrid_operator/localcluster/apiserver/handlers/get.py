"""GET of one object (kube-apiserver's ``GetResource``): as JSON, as a Table row, or as its Scale."""

from __future__ import annotations

from aiohttp import web

from hybrid_operator.localcluster.apiserver import decoding, encoding, scaling
from hybrid_operator.localcluster.apiserver.context import api_of
from hybrid_operator.localcluster.apiserver.urls import Target


async def get_resource(request: web.Request, target: Target) -> web.StreamResponse:
    obj = api_of(request).get(target.info, target.namespace or "", target.name)
    if target.subresource == "scale":
        return encoding.respond(scaling.to_scale(obj))
    if decoding.wants_table(request):
        return encoding.table(request, target.info, [obj], str(obj["metadata"].get("resourceVersion", "")))
    return encoding.respond(obj)
