"""``--metrics-secure`` and ``--metrics-require-rbac`` (the flags every SDK scaffold passes).

The metrics server speaks HTTPS with a self-signed certificate, and with RBAC a scrape needs a bearer
token that a TokenReview authenticates and a SubjectAccessReview allows ``get /metrics``.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from hybrid_operator.cli.commands import _settings, build_parser
from hybrid_operator.manager import health
from hybrid_operator.manager.metrics import metrics_app
from hybrid_operator.manager.metrics_security import ACCESS_REVIEWS, TOKEN_REVIEWS, RbacFilter, self_signed_context

pytestmark = pytest.mark.unit


class ReviewingCluster:
    """Answers TokenReviews (token -> user) and SubjectAccessReviews (user -> allowed) like an API server."""

    def __init__(self, users: dict[str, str], allowed: set[str]) -> None:
        self.users = users
        self.allowed = allowed
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        self.calls.append((path, body))
        if path == TOKEN_REVIEWS:
            user = self.users.get(body["spec"]["token"])
            return {"status": {"authenticated": True, "user": {"username": user, "groups": ["g"]}} if user
                    else {"authenticated": False}}
        assert path == ACCESS_REVIEWS
        spec = body["spec"]
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": spec["user"] in self.allowed}}


async def scrape(port: int, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, \
            session.get(f"https://127.0.0.1:{port}/metrics", headers=headers, ssl=False) as response:
        return response.status, await response.text()


async def test_secure_metrics_with_rbac() -> None:
    cluster = ReviewingCluster({"good": "system:serviceaccount:osdk-test:prometheus", "other": "alice"},
                               {"system:serviceaccount:osdk-test:prometheus"})
    app = metrics_app(lambda: "sanity_counter 0\n", [RbacFilter(cluster).middleware])  # type: ignore[arg-type]
    runner = await health.serve(app, "127.0.0.1:0", "metrics", ssl_context=self_signed_context())
    assert runner is not None
    port = int(next(a for a in runner.addresses if isinstance(a, tuple))[1])
    try:
        assert await scrape(port, "good") == (200, "sanity_counter 0\n")
        assert (await scrape(port, "other"))[0] == 403
        assert (await scrape(port, "forged"))[0] == 401
        assert (await scrape(port, None))[0] == 401
        calls = len(cluster.calls)
        assert (await scrape(port, "good"))[0] == 200
        assert len(cluster.calls) == calls, "a decision is cached for a minute"
    finally:
        await health.stop(runner)


async def test_an_unreachable_review_api_refuses() -> None:
    class Broken:
        def request(self, *args: Any, **kwargs: Any) -> Any:
            raise OSError("no route")

    assert (await RbacFilter(Broken()).decide("t", "/metrics", "get"))[0] == 403  # type: ignore[arg-type]


def test_the_sdk_scaffolds_flags_are_accepted() -> None:
    args = build_parser().parse_args(["run", "--metrics-require-rbac", "--metrics-secure",
                                      "--metrics-bind-address=:8443", "--leader-elect",
                                      "--leader-election-id=memcached-molecule-operator",
                                      "--health-probe-bind-address=:6789", "--enable-http2=false"])
    settings = _settings(args, None)
    assert settings.metrics_secure and settings.metrics_require_rbac
    assert settings.metrics_bind_address == ":8443"
