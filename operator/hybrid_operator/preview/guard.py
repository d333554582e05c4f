"""The API gate of ``hybrid-operator preview``: playbooks read the real cluster but never change it.

A preview runs the kind's playbook or role with a kubeconfig pointing here (plain HTTP on
127.0.0.1, a random bearer token). Reads are forwarded to the cluster with the operator's own
credentials; every write (POST, PUT, PATCH, DELETE) is forwarded with ``dryRun=All``, so the API
server validates and answers it without storing anything; any other method is refused. Reads of
the previewed custom resource itself are answered with the version from the file (``overlay``),
so that the automation sees the spec being previewed, even for a resource that does not exist yet.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web
from multidict import CIMultiDict

from hybrid_operator import listeners
from hybrid_operator.kube.connection import Connection

READ_METHODS = frozenset({"GET", "HEAD"})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HOP_HEADERS = frozenset({"host", "authorization", "content-length", "transfer-encoding", "connection",
                         "accept-encoding"})


def dry_run_query(query: Mapping[str, str]) -> list[tuple[str, str]]:
    """The query of a forwarded write: the original one with ``dryRun=All`` (and only that dryRun)."""
    return [(key, value) for key, value in query.items() if key != "dryRun"] + [("dryRun", "All")]


class DryRunGuard:
    """A local HTTP endpoint forwarding reads and dry-running writes.

    ``writes`` records the writes that came without ``dryRun=All`` (a module ignoring check mode):
    they were neutralized here, and the preview reports them.
    """

    def __init__(self, upstream: Connection, overlay: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.upstream = upstream
        self.overlay = dict(overlay or {})
        self.token = secrets.token_urlsafe(24)
        self.writes: list[tuple[str, str]] = []
        self._runner: listeners.GuardedRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = listeners.GuardedRunner(app, name="preview", access_log=None)
        await self._runner.setup()
        self._port = (await listeners.serve(self._runner, "127.0.0.1", 0))[0][1]
        connector = aiohttp.TCPConnector(ssl=self.upstream.ssl_context())
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def write_kubeconfig(self, path: Path, namespace: str) -> Path:
        document = {
            "apiVersion": "v1", "kind": "Config", "current-context": "preview",
            "clusters": [{"name": "preview", "cluster": {"server": self.url}}],
            "users": [{"name": "preview", "user": {"token": self.token}}],
            "contexts": [{"name": "preview", "context": {"cluster": "preview", "user": "preview",
                                                         "namespace": namespace}}],
        }
        # created 0600 (never readable by others, not even between a write and a chmod): it holds the token
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as handle:
            handle.write(yaml.safe_dump(document, sort_keys=False))
        return path

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization", "") != f"Bearer {self.token}":
            return _status(401, "Unauthorized", "preview: wrong or missing token")
        method = request.method.upper()
        if method == "GET" and request.path in self.overlay and request.query.get("watch") not in ("1", "true"):
            return web.json_response(self.overlay[request.path])
        if method in READ_METHODS:
            return await self._forward(request, list(request.query.items()))
        if method in WRITE_METHODS:
            if request.query.get("dryRun") != "All":
                self.writes.append((method, request.path))
            return await self._forward(request, dry_run_query(request.query))
        return _status(405, "MethodNotAllowed", f"preview: {method} is not allowed")

    async def _forward(self, request: web.Request, query: list[tuple[str, str]]) -> web.StreamResponse:
        assert self._session is not None
        headers = {key: value for key, value in request.headers.items() if key.lower() not in HOP_HEADERS}
        if self.upstream.token:
            headers["Authorization"] = f"Bearer {self.upstream.token}"
        body = await request.read()
        url = self.upstream.server.rstrip("/") + request.path
        async with self._session.request(request.method, url, params=query, headers=headers,
                                         data=body or None) as upstream:
            response = web.StreamResponse(status=upstream.status, headers=_response_headers(upstream))
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


def _response_headers(upstream: aiohttp.ClientResponse) -> CIMultiDict[str]:
    return CIMultiDict((key, value) for key, value in upstream.headers.items()
                       if key.lower() not in ("content-length", "transfer-encoding", "connection"))


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": code}
    return web.Response(status=code, text=json.dumps(body), content_type="application/json")
