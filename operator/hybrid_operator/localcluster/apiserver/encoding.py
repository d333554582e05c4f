"""Encoding answers the way kube-apiserver does: compact JSON, Warning headers, Status errors, Tables."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from hybrid_operator.localcluster import clock, errors
from hybrid_operator.localcluster.apiserver import tables
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics.writes import Outcome

JSON = "application/json"


def respond(body: Any, status: int = 200, content_type: str = JSON, warnings: list[str] | None = None) -> web.Response:
    response = web.Response(body=json.dumps(body, separators=(",", ":")).encode(), status=status)
    response.headers["Content-Type"] = content_type
    for warning in warnings or []:
        response.headers.add("Warning", f'299 - "{_escape(warning)}"')
    return response


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def written(outcome: Outcome) -> web.Response:
    """The answer to a write: the object, the write's status code, its warnings."""
    return respond(outcome.obj, outcome.code, warnings=outcome.warnings)


def error(failure: errors.ApiError) -> web.Response:
    """A failure as the ``Status`` object kube-apiserver sends."""
    return respond(failure.status(), failure.code)


def table(request: web.Request, info: ResourceInfo, items: list[dict[str, Any]], rv: str) -> web.Response:
    """``items`` as a ``meta.k8s.io/v1`` Table (``kubectl get``), honouring ``includeObject``."""
    include = request.query.get("includeObject", "Metadata") or "Metadata"
    body = tables.table(items, kind=info.kind, printer_columns=list(info.printer_columns) or None,
                        include_object=include, resource_version=rv, now=clock.now(),
                        api_version=info.group_version)
    return respond(body, content_type=tables.TABLE_CONTENT_TYPE)
