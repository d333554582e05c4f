"""DELETE of one object (``DeleteResource``) or of a selected collection (``DeleteCollection``).

Both read DeleteOptions from the body (propagationPolicy, preconditions,
dryRun, orphanDependents) on top of the query options. A collection's delete
honours a KEP-5866 ``shardSelector`` as its LIST does (and, with the feature
off, ignores it: the whole selected collection goes).
"""

from __future__ import annotations

from aiohttp import web

from hybrid_operator.localcluster.apiserver import decoding, encoding
from hybrid_operator.localcluster.apiserver.context import api_of, config_of
from hybrid_operator.localcluster.apiserver.urls import Target
from hybrid_operator.localcluster.semantics.writes import WriteOptions


async def delete_resource(request: web.Request, target: Target, opts: WriteOptions) -> web.StreamResponse:
    await decoding.read_delete_options(request, opts)
    return encoding.written(api_of(request).delete(target.info, target.namespace or "", target.name, opts))


async def delete_collection(request: web.Request, target: Target, opts: WriteOptions) -> web.StreamResponse:
    await decoding.read_delete_options(request, opts)
    labels, fields = decoding.selectors(request, target.info)
    shard = decoding.shard_selector(request, config_of(request).sharded_list_watch)
    return encoding.respond(api_of(request).delete_collection(target.info, target.namespace, labels, fields, opts,
                                                              shard))
