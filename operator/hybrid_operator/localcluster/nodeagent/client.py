"""The node agent's HTTP client: JSON requests and watches against one API server, nothing else.

A small aiohttp client instead of a Kubernetes client library, because the embedded cluster's package
may not depend on the operator's adapters (import-linter): the agent needs GET, LIST, WATCH, POST,
merge PATCH and DELETE of a handful of kinds, and answers as kube's ``Status`` (code, reason,
message) when a request is refused. A watch yields its events one by one; lines are split here (an
event can be larger than aiohttp's line limit).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from hybrid_operator.localcluster.nodeagent.kubeconfig import Endpoint

MERGE_PATCH = "application/merge-patch+json"
REQUEST_TIMEOUT = 30.0


class ApiError(Exception):
    """The API server refused a request (``status`` is the HTTP code; 0: it could not be reached)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


def _error(status: int, text: str) -> ApiError:
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return ApiError(status, str(body.get("reason") or ""), str(body.get("message") or ""))
    return ApiError(status, "", text[:200])


class ApiClient:
    """JSON over HTTP(S) to the server of an :class:`~.kubeconfig.Endpoint`."""

    def __init__(self, endpoint: Endpoint, user_agent: str) -> None:
        self.endpoint = endpoint
        self._headers = {**endpoint.headers, "User-Agent": user_agent, "Accept": "application/json"}
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ApiClient:
        connector = aiohttp.TCPConnector(ssl=self.endpoint.tls if self.endpoint.tls is not None else False, limit=8)
        self._session = aiohttp.ClientSession(connector=connector, headers=self._headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use the client in `async with`"
        return self._session

    async def request(self, method: str, path: str, *, body: Any = None, params: dict[str, str] | None = None,
                      content_type: str = "application/json") -> dict[str, Any]:
        """One request; its JSON answer, or :class:`ApiError`."""
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        try:
            async with self.session.request(method, self.endpoint.server + path, data=data, params=params,
                                            headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)) as response:
                text = await response.text()
                if response.status >= 400:
                    raise _error(response.status, text)
        except (aiohttp.ClientError, TimeoutError) as unreachable:
            raise ApiError(0, "Unreachable", f"{method} {path}: {unreachable or type(unreachable).__name__}") \
                from unreachable
        answer = json.loads(text) if text else {}
        return answer if isinstance(answer, dict) else {}

    async def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        return await self.request("GET", path, params=params)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def delete(self, path: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("DELETE", path, body=options)

    async def watch(self, path: str, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """The events of a WATCH from ``params['resourceVersion']`` until the server ends it."""
        query = {**params, "watch": "true", "allowWatchBookmarks": "true"}
        try:
            async with self.session.get(self.endpoint.server + path, params=query,
                                        timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as response:
                if response.status >= 400:
                    raise _error(response.status, await response.text())
                pending = b""
                async for chunk in response.content.iter_any():
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            event = json.loads(line)
                            if isinstance(event, dict):
                                yield event
        except (aiohttp.ClientError, TimeoutError) as broken:
            raise ApiError(0, "Unreachable", f"WATCH {path}: {broken or type(broken).__name__}") from broken
