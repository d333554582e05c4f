"""PUT of one object or subresource (kube-apiserver's ``UpdateResource``), ``/scale`` included."""

from __future__ import annotations

from aiohttp import web

from hybrid_operator.localcluster.apiserver import decoding, encoding, scaling
from hybrid_operator.localcluster.apiserver.context import api_of
from hybrid_operator.localcluster.apiserver.urls import Target
from hybrid_operator.localcluster.semantics.writes import WriteOptions


async def update_resource(request: web.Request, target: Target, opts: WriteOptions) -> web.StreamResponse:
    body = await decoding.body(request, decoding.BODY_TYPES)
    api, namespace = api_of(request), target.namespace or ""
    if target.subresource == "scale":
        return encoding.written(scaling.write(api, target.info, namespace, target.name, body, opts))
    return encoding.written(api.update(target.info, namespace, target.name, body, opts, target.subresource))
