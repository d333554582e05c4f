"""The aiohttp application of the embedded API server: its routes and the guard around them.

Every request but ``/version`` and the health probes must carry the
server's bearer token; every failure, whatever raised it, leaves as a
``Status`` object with kube-apiserver's code and reason, so that kubectl
prints ``Error from server (<Reason>)`` and clients raise the right
exception.  Paths the API does not serve are 404 Status answers too.  So are
the answers aiohttp itself gives before any route runs: a body over the
3 MiB limit (413), a URL over 8 KiB (414), a request line or header it cannot
parse (400): :class:`StatusRequestHandler` makes those Status objects as well.
Connections are bounded as on every listener of the project (header and idle
deadlines, a connection cap, a lingering close after a refused request line:
:mod:`hybrid_operator.listeners`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from hybrid_operator import listeners
from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import decoding, encoding, routing
from hybrid_operator.localcluster.apiserver.context import API_KEY, CONFIG_KEY, ServerConfig
from hybrid_operator.localcluster.apiserver.handlers import discovery
from hybrid_operator.localcluster.semantics.crud import ObjectApi

log = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/version", "/healthz", "/livez", "/readyz"})
RESOURCE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
MAX_URL_BYTES = 8 * 1024
MAX_LINE_BYTES = 16 * 1024  # aiohttp's own limit on the request line: longer ones never reach a route
MAX_FIELD_BYTES = 64 * 1024  # one header line


@web.middleware
async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """Authenticate, and turn every failure into a Status answer."""
    config = request.app[CONFIG_KEY]
    try:
        if len(request.raw_path) > MAX_URL_BYTES:
            raise errors.uri_too_long(MAX_URL_BYTES)
        if request.path not in PUBLIC_PATHS and request.headers.get("Authorization", "") != f"Bearer {config.token}":
            raise errors.unauthorized()
        result: web.StreamResponse = await handler(request)
        return result
    except errors.ApiError as error:
        return encoding.error(error)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return encoding.error(_from_http(exc.status, exc.reason, exc.text or exc.reason))
    except RecursionError:
        log.warning("request nested too deeply", extra={"method": request.method, "path": request.path})
        return encoding.error(errors.bad_request("the request is nested too deeply to be processed"))
    except Exception as exc:
        log.exception("request failed", extra={"method": request.method, "path": request.path})
        return encoding.error(errors.internal(str(exc)))


async def not_found(request: web.Request) -> web.Response:
    raise errors.path_not_found()


def _from_http(status: int, reason: str, message: str) -> errors.ApiError:
    """An error aiohttp raised or answered by itself, as the Status kube-apiserver would send."""
    if status == 413:
        return errors.request_entity_too_large(f"limit is {decoding.MAX_BODY_BYTES}")
    if status == 414:
        return errors.uri_too_long(MAX_URL_BYTES)
    reasons = {400: "BadRequest", 404: "NotFound", 405: "MethodNotAllowed", 408: "Timeout", 431: "BadRequest"}
    return errors.ApiError(status, reasons.get(status, reason.replace(" ", "") or "InternalError"), message)


class StatusRequestHandler(listeners.GuardedRequestHandler):
    """The connection handler: its own errors (unparsable requests) are answered with a Status too."""

    def error_response(self, request: Any, status: int, exc: BaseException | None,
                       message: str | None) -> web.StreamResponse:
        if request.writer.output_size > 0:  # as aiohttp: an answer was begun, the connection is lost
            raise ConnectionError("the answer was begun already, it cannot become an error answer")
        if status >= 500:
            self.log_exception("Error handling request", exc_info=exc)
        else:
            log.debug("request refused by the HTTP parser", extra={"status": status, "error": str(exc or message)})
        if isinstance(exc, LineTooLong) and str(exc.args[1]) == str(MAX_LINE_BYTES):
            failure = errors.uri_too_long(MAX_URL_BYTES)  # the request line: its URL is far over the limit
        elif isinstance(exc, LineTooLong):
            failure = errors.ApiError(431, "RequestHeaderFieldsTooLarge",
                                      f"a request header is longer than {MAX_FIELD_BYTES} bytes")
        elif isinstance(exc, HttpProcessingError) and status == 400:
            failure = errors.bad_request(f"malformed HTTP request: {exc.message or exc}")
        else:
            failure = _from_http(status, "", message or "the server could not process the request")
        answer = web.Response(status=failure.code, body=json.dumps(failure.status()).encode(),
                              content_type="application/json")
        answer.force_close()
        return answer


def runner(application: web.Application, limits: listeners.ConnectionLimits | None = None) -> listeners.GuardedRunner:
    """The runner to serve ``application`` with: request lines up to :data:`MAX_LINE_BYTES`, Status errors,
    connections bounded by ``limits`` (serve it with :func:`hybrid_operator.listeners.serve`)."""
    return listeners.GuardedRunner(application, name="api-server", limits=limits,
                                   handler_class=StatusRequestHandler, handle_signals=False, access_log=None,
                                   shutdown_timeout=1.0, max_line_size=MAX_LINE_BYTES,
                                   max_field_size=MAX_FIELD_BYTES)


def build_app(api: ObjectApi, config: ServerConfig) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=decoding.MAX_BODY_BYTES)
    app[API_KEY] = api
    app[CONFIG_KEY] = config
    app.router.add_get("/version", discovery.version)
    for path in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(path, discovery.health)
    app.router.add_get("/api", discovery.core_root)
    app.router.add_get("/apis", discovery.groups_root)
    app.router.add_get("/openapi/v2", discovery.openapi_v2)
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
