"""The aiohttp application of the embedded API server: its routes and the guard around them.

Every request but ``/version`` and the health probes must carry the
server's bearer token; every failure, whatever raised it, leaves as a
``Status`` object with kube-apiserver's code and reason, so that kubectl
prints ``Error from server (<Reason>)`` and clients raise the right
exception.  Paths the API does not serve are 404 Status answers too.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import encoding, routing
from hybrid_operator.localcluster.apiserver.context import API_KEY, CONFIG_KEY, ServerConfig
from hybrid_operator.localcluster.apiserver.handlers import discovery
from hybrid_operator.localcluster.semantics.crud import ObjectApi

log = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/version", "/healthz", "/livez", "/readyz"})
RESOURCE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@web.middleware
async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """Authenticate, and turn every failure into a Status answer."""
    config = request.app[CONFIG_KEY]
    try:
        if request.path not in PUBLIC_PATHS and request.headers.get("Authorization", "") != f"Bearer {config.token}":
            raise errors.unauthorized()
        result: web.StreamResponse = await handler(request)
        return result
    except errors.ApiError as error:
        return encoding.error(error)
    except web.HTTPException:
        raise
    except Exception as exc:
        log.exception("request failed", extra={"method": request.method, "path": request.path})
        return encoding.error(errors.internal(str(exc)))


async def not_found(request: web.Request) -> web.Response:
    raise errors.path_not_found()


def build_app(api: ObjectApi, config: ServerConfig) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=16 * 1024 * 1024)
    app[API_KEY] = api
    app[CONFIG_KEY] = config
    app.router.add_get("/version", discovery.version)
    for path in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(path, discovery.health)
    app.router.add_get("/api", discovery.core_root)
    app.router.add_get("/apis", discovery.groups_root)
    app.router.add_get("/openapi/v3", discovery.openapi_v3_index)
    app.router.add_get("/openapi/v3/{tail:.+}", discovery.openapi_v3_document)
    for method in RESOURCE_METHODS:
        app.router.add_route(method, "/api/v1", routing.core_resources)
        app.router.add_route(method, "/api/v1/{tail:.+}", routing.core_resources)
        app.router.add_route(method, "/apis/{group}", routing.group_resources)
        app.router.add_route(method, "/apis/{group}/{version}", routing.group_resources)
        app.router.add_route(method, "/apis/{group}/{version}/{tail:.+}", routing.group_resources)
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
