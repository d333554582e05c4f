"""``--metrics-secure`` and ``--metrics-require-rbac``: the metrics endpoint as the Operator SDK serves it.

Why this module exists: every operator scaffolded by the SDK passes both flags (its
``manager_metrics_patch.yaml``), and Prometheus then scrapes ``https://...:8443/metrics`` with its
service account token. As controller-runtime does:

* ``--metrics-secure`` serves ``/metrics`` over HTTPS with a self-signed certificate made at start
  (controller-runtime's default when no certificate directory is given; scrapers skip verification
  or pin it), HTTP/1.1 only (the SDK turns HTTP/2 off unless ``--enable-http2``);
* ``--metrics-require-rbac`` authenticates the request's bearer token with a ``TokenReview`` and
  authorizes it with a ``SubjectAccessReview`` for the non-resource URL (``get /metrics``): no
  token or an invalid one is 401, a user not allowed is 403. Decisions are cached for a minute per
  token, path and verb, so a scrape does not cost two API calls each time.

The operator's service account needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews``
(the SDK's ``metrics_auth_role``); without it every scrape is refused, never let through.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import ipaddress
import logging
import socket
import ssl
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hybrid_operator import errors
from hybrid_operator.kube.client import ClusterClient

log = logging.getLogger(__name__)

CACHE_SECONDS = 60.0
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def self_signed_context() -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate for localhost, 127.0.0.1 and this host."""
    key = ec.generate_private_key(ec.SECP256R1())
    host = socket.gethostname()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"hybrid-operator-metrics@{int(time.time())}")])
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    alternative = [x509.DNSName("localhost"), x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now)
                   .not_valid_after(now + datetime.timedelta(days=365))
                   .add_extension(x509.SubjectAlternativeName(alternative), critical=False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                   .sign(key, hashes.SHA256()))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.set_alpn_protocols(["http/1.1"])
    with tempfile.TemporaryDirectory(prefix="hybrid-operator-metrics-") as directory:
        cert_path, key_path = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_path.touch(mode=0o600)
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        context.load_cert_chain(cert_path, key_path)  # the files are gone once loaded
    return context


class RbacFilter:
    """controller-runtime's ``WithAuthenticationAndAuthorization`` for the metrics server (a middleware)."""

    def __init__(self, cluster: ClusterClient, clock: Any = time.monotonic) -> None:
        self.cluster = cluster
        self.clock = clock
        self._decisions: dict[tuple[str, str, str], tuple[float, int, str]] = {}

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        if not token:
            return web.Response(status=401, text="Unauthorized: a bearer token is required\n")
        status, reason = await self.decide(token, request.path, request.method.lower())
        if status != 200:
            return web.Response(status=status, text=reason + "\n")
        return await handler(request)

    async def decide(self, token: str, path: str, verb: str) -> tuple[int, str]:
        """(200, "") when the token's user may ``verb`` ``path``; else (401 or 403, why)."""
        key = (hashlib.sha256(token.encode()).hexdigest(), path, verb)
        cached = self._decisions.get(key)
        if cached is not None and self.clock() - cached[0] < CACHE_SECONDS:
            return cached[1], cached[2]
        try:
            status, reason = await asyncio.to_thread(self._review, token, path, verb)
        except errors.TemporaryError as exc:
            log.warning("metrics request not authorized", extra={"error": str(exc)})
            return 403, f"Forbidden: the request could not be authorized ({exc})"
        self._decisions[key] = (self.clock(), status, reason)
        if len(self._decisions) > 1024:
            self._decisions.pop(next(iter(self._decisions)))
        return status, reason

    def _review(self, token: str, path: str, verb: str) -> tuple[int, str]:
        review = self._post(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                            "spec": {"token": token}})
        outcome = review.get("status") or {}
        if not outcome.get("authenticated"):
            return 401, "Unauthorized"
        user = outcome.get("user") or {}
        spec = {"user": user.get("username", ""), "uid": user.get("uid", ""), "groups": user.get("groups") or [],
                "extra": user.get("extra") or {}, "nonResourceAttributes": {"path": path, "verb": verb}}
        access = self._post(ACCESS_REVIEWS, {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                             "spec": spec})
        if (access.get("status") or {}).get("allowed"):
            return 200, ""
        return 403, f'Forbidden (user={user.get("username", "")}, verb={verb}, resource=, subresource=)'

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            answer = self.cluster.request("POST", path, body, timeout=10)
        except Exception as exc:  # ApiException, connection errors: refuse, never let through
            status = getattr(exc, "status", None)
            raise errors.TemporaryError(f"POST {path} failed ({status or type(exc).__name__})") from exc
        return answer if isinstance(answer, dict) else {}
