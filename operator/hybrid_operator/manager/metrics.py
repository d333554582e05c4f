"""The process's metrics endpoints: ``GET /metrics`` for Prometheus and the playbooks' ``POST /metrics``.

The metrics themselves live in :mod:`hybrid_operator.controller.metrics`; this is only their HTTP
face, served by the operator process (:mod:`.runtime`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware

from hybrid_operator.controller.metrics import CONTENT_TYPE, UserMetricError, UserMetrics


def metrics_app(render: Callable[[], str], middlewares: Sequence[Middleware] = ()) -> web.Application:
    """``GET /metrics``: everything ``render`` returns, as Prometheus text (``middlewares``: the RBAC filter)."""

    async def scrape(_: web.Request) -> web.Response:
        return web.Response(body=render().encode(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application(middlewares=list(middlewares))
    app.router.add_get("/metrics", scrape)
    return app


def user_metrics_app(user: UserMetrics) -> web.Application:
    """``POST /metrics`` with one osdk_metric operation (JSON): 200, or 400 saying what is wrong."""

    async def receive(request: web.Request) -> web.Response:
        try:
            payload = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.Response(status=400, text="the body must be a JSON object")
        if not isinstance(payload, dict):
            return web.Response(status=400, text="the body must be a JSON object")
        try:
            user.apply(payload)
        except (UserMetricError, ValueError) as exc:
            return web.Response(status=400, text=str(exc))
        return web.Response(text="ok")

    app = web.Application(client_max_size=64 * 1024)
    app.router.add_post("/metrics", receive)
    return app
