"""The API proxy Ansible runs talk to: forwards everything, marks what a run creates as the CR's dependent.

Each run gets its own kubeconfig (:meth:`OwnerProxy.register_run`) pointing at
this proxy with a random bearer token; the token tells the proxy which custom
resource the run reconciles.  Requests are forwarded to the real API server
with the operator's credentials (the run's token never leaves the process),
responses are streamed back unchanged (watches line by line).  Writes that
create or restate a whole object get the owner link described in
:mod:`hybrid_operator.ownership`, and each successful one is reported through
``on_child`` and remembered per owner, so the operator can watch dependents.

The proxy speaks HTTPS with a throwaway CA of its own, put in every run
kubeconfig: client-go (kubectl, helm) refuses to send a bearer token over plain
http, while the Python client used by ``kubernetes.core`` would happily do so.
Its connections are bounded as on every listener of the project (header and
idle deadlines, a connection cap: :mod:`hybrid_operator.listeners`).

What a run token is (docs/security.md): 32 random bytes, valid from
:meth:`OwnerProxy.register_run` until :meth:`OwnerProxy.unregister_run`, which
the reconciler calls when the run ends however it ends -- a token that outlived
its run gets 401. It stands for exactly one custom resource: whatever is
written with it is recorded as that resource's dependent, never another's. It
is not an authorisation scope: a request it carries reaches the API with the
operator's own credentials, so a playbook can do what the operator's service
account may do. It lives only in its run's kubeconfig (its own 0700 directory,
see :mod:`hybrid_operator.ansible.credentials`), never in the environment, the
command line or the artifacts. Only origin-form API request targets are
forwarded (:func:`api_target`); the upstream URL is built from its parts.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import inspect
import ipaddress
import json
import logging
import os
import re
import secrets
import ssl
import tempfile
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web
from aiohttp.typedefs import Handler
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from multidict import CIMultiDict
from yarl import URL

from hybrid_operator import listeners
from hybrid_operator.ansible import ownership
from hybrid_operator.kube.connection import Connection

log = logging.getLogger(__name__)

ChildCallback = Callable[[ownership.OwnerKey, ownership.ChildRef], Awaitable[None] | None]

# Connection-level headers (RFC 9110 §7.6.1) and those the proxy sets itself.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "authorization", "content-length"})
RESPONSE_SKIPPED = HOP_BY_HOP | {"date", "server"}
SKIP_AUTO_HEADERS = ("Accept-Encoding", "User-Agent", "Content-Type")
CERT_VALIDITY = datetime.timedelta(days=365)
#: the first path segments the proxy forwards: the resource APIs and the non-resource paths clients read
API_ROOTS = frozenset({"api", "apis", "version", "openapi", "healthz", "livez", "readyz"})
# RFC 3986: pchar = unreserved / pct-encoded / sub-delims / ":" / "@"; a query adds "/" and "?"
_PATH_CHARACTERS = re.compile(r"(/([A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)+")
_QUERY_CHARACTERS = re.compile(r"([A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*")


@dataclass(frozen=True)
class RunCredentials:
    """What one run uses to reach the proxy: its token and a kubeconfig carrying it."""

    token: str = field(repr=False)
    server: str
    ca_pem: bytes
    owner: ownership.Owner

    def kubeconfig_text(self) -> str:
        document = {
            "apiVersion": "v1", "kind": "Config", "current-context": "run", "preferences": {},
            "clusters": [{"name": "proxy", "cluster": {
                "server": self.server, "certificate-authority-data": base64.b64encode(self.ca_pem).decode()}}],
            "users": [{"name": "run", "user": {"token": self.token}}],
            "contexts": [{"name": "run", "context": {"cluster": "proxy", "user": "run",
                                                     "namespace": self.owner.namespace or "default"}}],
        }
        return yaml.safe_dump(document, sort_keys=False)

    def write_kubeconfig(self, path: Path) -> Path:
        """Writes the kubeconfig (created with mode 0600, atomically) and returns ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = path.with_name(path.name + ".tmp")
        temp.unlink(missing_ok=True)
        with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as handle:
            handle.write(self.kubeconfig_text())
        temp.replace(path)
        return path


@dataclass(frozen=True)
class _Resource:
    """What discovery says about one plural."""

    kind: str
    namespaced: bool
    verbs: frozenset[str]


@dataclass(frozen=True)
class _Plan:
    """An injected write: the rewritten body and the dependent it produces."""

    body: bytes
    child: ownership.ChildRef
    dry_run: bool


# -- TLS ------------------------------------------------------------------------------------------------


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _serving_material() -> tuple[bytes, bytes, bytes]:
    """A fresh CA and a 127.0.0.1/localhost certificate it signed: (ca_pem, cert_pem, key_pem)."""
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("hybrid-operator-proxy-ca")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + CERT_VALIDITY)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False),
                         critical=True)
          .add_extension(ca_ski, critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("hybrid-operator-proxy")).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + CERT_VALIDITY)
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return ca.public_bytes(pem), cert.public_bytes(pem), _pem_key(key)


def _server_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory(prefix="hybrid-operator-proxy-") as directory:
        cert_path, key_path = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        cert_path.write_bytes(cert_pem)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key_pem)
        context.load_cert_chain(cert_path, key_path)  # the files are gone once loaded
    return context


# -- the proxy ------------------------------------------------------------------------------------------


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    return web.json_response(body, status=code)


def api_target(raw_target: str) -> tuple[str, str] | None:
    """The (path, query) of an origin-form request target for the Kubernetes API, both still
    percent-encoded, or None for any other target.

    Refused: absolute-form (``http://host/api``), authority-form and ``*`` targets; paths outside
    :data:`API_ROOTS`; ``.``/``..`` segments (also percent-encoded) and empty segments, which could
    make the upstream server see another path than the one checked here; fragments and characters
    that RFC 3986 does not allow in a path or query.
    """
    if not raw_target.startswith("/") or raw_target.startswith("//") or "#" in raw_target:
        return None
    path, _, query = raw_target.partition("?")
    if not _PATH_CHARACTERS.fullmatch(path) or not _QUERY_CHARACTERS.fullmatch(query):
        return None
    segments = [urllib.parse.unquote(segment) for segment in path[1:].split("/")]
    if segments[-1] == "" and len(segments) > 1:
        segments.pop()  # one trailing slash is harmless
    if segments[0] not in API_ROOTS or any(segment in ("", ".", "..") for segment in segments):
        return None
    return path, query


def _bad_target(request: web.Request) -> web.Response:
    target = request.raw_path[:200]
    return _status(400, "BadRequest", "the proxy forwards only Kubernetes API requests in origin form (a path "
                                      f"starting with /api/ or /apis/, no dot segments), got {target!r}")


@web.middleware
async def _only_api_targets(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse any other request target before routing (which would answer ``*`` with a plain-text 404)."""
    if api_target(request.raw_path) is None:
        return _bad_target(request)
    return await handler(request)


def _bearer(request: web.Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class OwnerProxy:
    """An HTTPS proxy on 127.0.0.1 for Ansible runs; see the module docstring."""

    def __init__(self, upstream: Connection, *, inject: bool = True, on_child: ChildCallback | None = None,
                 port: int = 0, limits: listeners.ConnectionLimits | None = None) -> None:
        self.upstream = upstream
        self.inject = inject
        self.on_child = on_child
        self._port = port
        #: header and idle deadlines as kube-apiserver's; at most half the descriptors the process has left
        self.limits = limits or listeners.ConnectionLimits(descriptor_share=0.5)
        self._runs: dict[str, ownership.Owner] = {}
        self._discovery: dict[str, dict[str, _Resource]] = {}
        self._ca_pem = b""
        self._session: aiohttp.ClientSession | None = None
        self._runner: listeners.GuardedRunner | None = None

    # -- lifecycle

    @property
    def port(self) -> int:
        if self._runner is None:
            raise RuntimeError("the proxy is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        return self._ca_pem

    async def start(self) -> None:
        """Listens on 127.0.0.1 (the given port, or a free one); everything is released if this fails."""
        ca_pem, cert_pem, key_pem = _serving_material()
        server_context = _server_context(cert_pem, key_pem)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.upstream.ssl_context()), auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[_only_api_targets])
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = listeners.GuardedRunner(app, name="ownership-proxy", limits=self.limits,
                                               handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        try:
            await self._runner.setup()
            bound = await listeners.serve(self._runner, "127.0.0.1", self._port, ssl_context=server_context)
            self._port = bound[0][1]
        except BaseException:
            await self.stop()
            raise
        self._ca_pem = ca_pem
        log.info("ownership proxy listening", extra={"url": self.url, "inject": self.inject})

    async def stop(self) -> None:
        """Stops serving; every connection is closed when this returns.

        aiohttp closes idle keep-alive connections with a TLS close_notify and leaves the socket open
        until the client answers, which an idle client may never do; the runner aborts those (and TLS
        handshakes still in progress), so that no socket outlives the proxy (or the event loop it ran on).
        """
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- runs

    def register_run(self, owner: dict[str, Any]) -> RunCredentials:
        """New credentials for one run reconciling ``owner`` (the CR object as read from the API)."""
        resolved = ownership.Owner.from_object(owner)
        token = secrets.token_urlsafe(32)
        self._runs[token] = resolved
        return RunCredentials(token=token, server=self.url, ca_pem=self._ca_pem, owner=resolved)

    def unregister_run(self, token: str) -> None:
        """Revokes a run's token (call it when the run ends, however it ends); later requests with it get 401."""
        self._runs.pop(token, None)

    # -- requests

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        target = api_target(request.raw_path)
        if target is None:  # _only_api_targets answered already
            return _bad_target(request)
        owner = self._runs.get(_bearer(request))
        if owner is None:
            return _status(401, "Unauthorized", "Unauthorized")
        url = self._url(*target)
        body = await request.read()
        plan = await self._plan(request, owner, body) if self.inject else None
        try:
            if plan is None:
                return await self._forward(request, url, body)
            return await self._forward_injected(request, url, owner, plan)
        except aiohttp.ClientError as exc:
            log.warning("upstream request failed", extra={"path": request.path, "error": str(exc)})
            return _status(503, "ServiceUnavailable", f"the API server is unreachable: {exc}")

    async def _plan(self, request: web.Request, owner: ownership.Owner, body: bytes) -> _Plan | None:
        target = ownership.parse_path(request.path)
        content_type = request.headers.get("Content-Type")
        write = ownership.plan_write(request.method, content_type, target)
        if target is None or write is None:
            return None
        decoded = ownership.decode_body(content_type, body)
        if decoded is None or ownership.is_owner(owner, target, decoded):
            return None
        resource = await self._resource(target)
        if resource is None or ownership.is_virtual(resource.verbs):
            return None
        link = ownership.choose_link(owner, target.namespace)
        if write != "create" and not ownership.links_existing(await self._existing(request), owner, link):
            return None  # someone else's object: an apply or a replace must not adopt it
        injected = ownership.inject_body(content_type, body, owner, link)
        if injected is None:
            return None
        child = ownership.child_ref(target, decoded, link, kind=resource.kind)
        return _Plan(injected, child, dry_run="dryRun" in request.query)

    async def _existing(self, request: web.Request) -> ownership.Existing:
        """The object an apply or a replace addresses, as it is before the write (``ABSENT`` for a 404,
        ``UNKNOWN`` when the API could not say)."""
        target = api_target(request.raw_path)
        if target is None:
            return ownership.UNKNOWN
        headers = {"Accept": "application/json"}
        if self.upstream.token:
            headers["Authorization"] = f"Bearer {self.upstream.token}"
        try:
            async with self._client().get(self._url(target[0]), headers=headers) as response:
                if response.status == 404:
                    return ownership.ABSENT
                if response.status != 200:
                    return ownership.UNKNOWN
                found = json.loads(await response.read())
        except (TimeoutError, aiohttp.ClientError, ValueError):
            return ownership.UNKNOWN
        return found if isinstance(found, dict) else ownership.UNKNOWN

    def _headers(self, request: web.Request, *, keep_encoding: bool = True) -> dict[str, str]:
        headers = {key: value for key, value in request.headers.items() if key.lower() not in HOP_BY_HOP}
        if not keep_encoding:
            headers.pop("Accept-Encoding", None)
        if self.upstream.token:
            headers["Authorization"] = f"Bearer {self.upstream.token}"
        return headers

    def _url(self, path: str, query: str = "") -> URL:
        """The upstream URL for an already checked, still encoded API path and query (see :func:`api_target`),
        built from its parts: the upstream server's scheme and authority, its path prefix, then ``path``."""
        base = URL(self.upstream.server)
        return URL.build(scheme=base.scheme, authority=base.raw_authority, path=base.raw_path.rstrip("/") + path,
                         query_string=query, encoded=True)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("the proxy is not started")
        return self._session

    async def _forward(self, request: web.Request, url: URL, body: bytes) -> web.StreamResponse:
        async with self._client().request(request.method, url,
                                          headers=self._headers(request), data=body or None,
                                          allow_redirects=False, skip_auto_headers=SKIP_AUTO_HEADERS) as upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason,
                                          headers=_response_headers(upstream))
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def _forward_injected(self, request: web.Request, url: URL, owner: ownership.Owner,
                                plan: _Plan) -> web.Response:
        headers = self._headers(request, keep_encoding=False)
        async with self._client().request(request.method, url, headers=headers,
                                          data=plan.body, allow_redirects=False,
                                          skip_auto_headers=SKIP_AUTO_HEADERS) as upstream:
            data = await upstream.read()
            response = web.Response(status=upstream.status, reason=upstream.reason, body=data,
                                    headers=_response_headers(upstream))
        if 200 <= upstream.status < 300 and not plan.dry_run:
            await self._record(owner, _created_child(plan.child, data))
        return response

    async def _record(self, owner: ownership.Owner, child: ownership.ChildRef) -> None:
        log.info("dependent written", extra={"owner": f"{owner.kind}/{owner.namespace}/{owner.name}",
                                             "child": f"{child.kind}/{child.namespace}/{child.name}",
                                             "link": child.link})
        if self.on_child is None:
            return
        try:
            result = self.on_child(owner.key, child)
            if inspect.isawaitable(result):
                await result
        except Exception:  # a broken callback must not fail the run's request
            log.exception("on_child callback failed", extra={"child": f"{child.kind}/{child.name}"})

    # -- discovery

    async def _resource(self, target: ownership.Target) -> _Resource | None:
        """Discovery facts for the target's plural (re-read once when unknown, e.g. a new CRD)."""
        group_version = target.api_version
        known = self._discovery.get(group_version)
        if known is None or target.plural not in known:
            known = await self._discover(target)
            self._discovery[group_version] = known
        return known.get(target.plural)

    async def _discover(self, target: ownership.Target) -> dict[str, _Resource]:
        path = f"/apis/{target.group}/{target.version}" if target.group else f"/api/{target.version}"
        headers = {"Accept": "application/json"}
        if self.upstream.token:
            headers["Authorization"] = f"Bearer {self.upstream.token}"
        try:
            async with self._client().get(self._url(path), headers=headers) as response:
                if response.status != 200:
                    return {}
                listing = json.loads(await response.read())
        except (TimeoutError, aiohttp.ClientError, ValueError):
            return {}
        return {str(item["name"]): _Resource(str(item.get("kind", "")), bool(item.get("namespaced")),
                                             frozenset(item.get("verbs") or ()))
                for item in listing.get("resources") or [] if "/" not in str(item.get("name", "/"))}


def _response_headers(upstream: aiohttp.ClientResponse) -> CIMultiDict[str]:
    return CIMultiDict((key, value) for key, value in upstream.headers.items()
                       if key.lower() not in RESPONSE_SKIPPED)


def _created_child(child: ownership.ChildRef, response_body: bytes) -> ownership.ChildRef:
    """The child with the name the server gave it (generateName), when the answer says so."""
    with contextlib.suppress(ValueError):
        answer = json.loads(response_body)
        name = answer.get("metadata", {}).get("name") if isinstance(answer, dict) else None
        if name and name != child.name:
            return ownership.ChildRef(child.api_version, child.group, child.version, child.kind, child.plural,
                                      child.namespace, str(name), child.link)
    return child
