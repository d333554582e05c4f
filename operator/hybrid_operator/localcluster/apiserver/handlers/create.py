"""POST to a collection (kube-apiserver's ``CreateResource``)."""

from __future__ import annotations

from aiohttp import web

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import decoding, encoding
from hybrid_operator.localcluster.apiserver.context import api_of
from hybrid_operator.localcluster.apiserver.urls import Target
from hybrid_operator.localcluster.semantics.writes import WriteOptions


async def create_resource(request: web.Request, target: Target, opts: WriteOptions) -> web.StreamResponse:
    if target.info.namespaced and target.namespace is None:
        raise errors.method_not_allowed()  # a namespaced kind is created in a namespace, not across all
    body = await decoding.body(request, decoding.BODY_TYPES)
    return encoding.written(api_of(request).create(target.info, target.namespace or "", body, opts))
