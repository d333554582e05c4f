"""PATCH of one object or subresource (kube-apiserver's ``PatchResource``), ``/scale`` included.

The Content-Type says which of the four patch formats the body is; custom
resources take every format but strategic merge patch, as in kube-apiserver.
"""

from __future__ import annotations

from aiohttp import web

from hybrid_operator.localcluster.apiserver import decoding, encoding, scaling
from hybrid_operator.localcluster.apiserver.context import api_of
from hybrid_operator.localcluster.apiserver.urls import Target
from hybrid_operator.localcluster.semantics.writes import PATCH_STRATEGIC, PATCH_TYPES, WriteOptions


async def patch_resource(request: web.Request, target: Target, opts: WriteOptions) -> web.StreamResponse:
    info, api, namespace = target.info, api_of(request), target.namespace or ""
    media = decoding.media_type(request)
    allowed = tuple(t for t in PATCH_TYPES if not (info.custom and t == PATCH_STRATEGIC))
    patch = await decoding.body(request, allowed)
    if target.subresource == "scale":
        current = scaling.to_scale(api.get(info, namespace, target.name))
        scale = scaling.patched_scale(current, media, patch)
        return encoding.written(scaling.write(api, info, namespace, target.name, scale, opts))
    return encoding.written(api.patch(info, namespace, target.name, media, patch, opts, target.subresource))
