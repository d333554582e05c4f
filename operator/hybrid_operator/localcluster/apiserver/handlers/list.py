"""LIST of a collection (kube-apiserver's ``ListResource``): selectors, shard selector, paging, or a Table."""

from __future__ import annotations

from aiohttp import web

from hybrid_operator.localcluster.apiserver import decoding, encoding
from hybrid_operator.localcluster.apiserver.context import api_of
from hybrid_operator.localcluster.apiserver.urls import Target
from hybrid_operator.localcluster.semantics.fieldselectors import FieldSelector
from hybrid_operator.localcluster.semantics.labelselectors import LabelSelector
from hybrid_operator.localcluster.semantics.shardselectors import ShardSelector


async def list_resources(request: web.Request, target: Target, labels: LabelSelector,
                         fields: FieldSelector, shard: ShardSelector | None = None) -> web.StreamResponse:
    listed = api_of(request).list(target.info, target.namespace, labels, fields, decoding.limit(request),
                                  request.query.get("continue", ""), shard)
    if decoding.wants_table(request):
        return encoding.table(request, target.info, listed["items"], listed["metadata"]["resourceVersion"])
    return encoding.respond(listed)
