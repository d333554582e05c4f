"""HTTP routes of the embedded API server (aiohttp).

Decodes what real clients send (paths, query flags parsed like Go's
``strconv.ParseBool``, JSON/YAML/protobuf bodies, patch content types, Table
and aggregated-discovery Accept headers), checks the bearer token, calls
:mod:`api` for the object semantics and :mod:`watching` for watches, and
encodes every answer as JSON, every failure as a ``Status``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml
from aiohttp import web

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import discovery, protobuf, scaling, tables, watch
from hybrid_operator.localcluster.apiserver.audit import AuditLog, rbac_verb
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.fieldselectors import parse_field_selector
from hybrid_operator.localcluster.semantics.labelselectors import parse_label_selector
from hybrid_operator.localcluster.semantics.writes import PATCH_APPLY, PATCH_STRATEGIC, PATCH_TYPES, WriteOptions

log = logging.getLogger("hybrid_operator.localcluster.http")

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
BODY_TYPES = (JSON, YAML, PROTOBUF)
PUBLIC_PATHS = frozenset({"/version", "/healthz", "/livez", "/readyz"})
TRUE_WORDS = frozenset({"1", "t", "T", "TRUE", "true", "True"})
FALSE_WORDS = frozenset({"0", "f", "F", "FALSE", "false", "False"})



@dataclass(frozen=True)
class ServerConfig:
    """What the routes need to know about the server they run in."""

    token: str
    address: str
    bookmark_interval: float = 30.0
    audit: AuditLog | None = None


API_KEY: web.AppKey[ObjectApi] = web.AppKey("api", ObjectApi)
CONFIG_KEY: web.AppKey[ServerConfig] = web.AppKey("config", ServerConfig)


def parse_bool(value: str | None, name: str) -> bool:
    if value is None or value == "":
        return False
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise errors.bad_request(f'invalid boolean value "{value}" for query parameter {name}')


def _dumps(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def respond(body: Any, status: int = 200, content_type: str = JSON, warnings: list[str] | None = None) -> web.Response:
    response = web.Response(body=_dumps(body), status=status)
    response.headers["Content-Type"] = content_type
    for warning in warnings or []:
        response.headers.add("Warning", f'299 - "{_escape(warning)}"')
    return response


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def error_response(error: errors.ApiError) -> web.Response:
    return respond(error.status(), error.code)


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
        return error_response(error)
    except web.HTTPException:
        raise
    except Exception as exc:
        log.exception("request failed", extra={"method": request.method, "path": request.path})
        return error_response(errors.internal(str(exc)))


# -- discovery and OpenAPI ----------------------------------------------------------


def _aggregated_version(request: web.Request) -> str | None:
    accept = request.headers.get("Accept", "")
    for part in accept.split(","):
        if "as=APIGroupDiscoveryList" in part and "g=apidiscovery.k8s.io" in part:
            if "v=v2beta1" in part:
                return "v2beta1"
            if "v=v2" in part:
                return "v2"
    return None


async def version(request: web.Request) -> web.Response:
    return respond(discovery.SERVER_VERSION)


async def health(request: web.Request) -> web.Response:
    response = web.Response(text="ok")
    response.headers["Content-Type"] = "text/plain; charset=utf-8"
    return response


async def core_root(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    wanted = _aggregated_version(request)
    if wanted:
        version_name = f"apidiscovery.k8s.io/{wanted}"
        return respond(discovery.aggregated(api.registry, True, version_name),
                       content_type=f"{JSON};g=apidiscovery.k8s.io;v={wanted};as=APIGroupDiscoveryList")
    return respond(discovery.api_versions(request.app[CONFIG_KEY].address))


async def groups_root(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    wanted = _aggregated_version(request)
    if wanted:
        version_name = f"apidiscovery.k8s.io/{wanted}"
        return respond(discovery.aggregated(api.registry, False, version_name),
                       content_type=f"{JSON};g=apidiscovery.k8s.io;v={wanted};as=APIGroupDiscoveryList")
    return respond(discovery.api_group_list(api.registry))


async def openapi_v3_index(request: web.Request) -> web.Response:
    return respond(discovery.openapi_index(request.app[API_KEY].registry))


async def openapi_v3_document(request: web.Request) -> web.Response:
    parts = request.match_info["tail"].split("/")
    registry = request.app[API_KEY].registry
    doc = None
    if len(parts) == 2 and parts[0] == "api":
        doc = discovery.openapi_document(registry, "", parts[1])
    elif len(parts) == 3 and parts[0] == "apis":
        doc = discovery.openapi_document(registry, parts[1], parts[2])
    if doc is None:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    return respond(doc)


async def not_found_route(request: web.Request) -> web.Response:
    raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")


# -- resources ----------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A parsed resource URL."""

    info: ResourceInfo
    namespace: str | None  # None: all namespaces (or cluster-scoped)
    name: str
    subresource: str


def resolve(request: web.Request, group: str, version: str, rest: list[str]) -> Target:
    registry = request.app[API_KEY].registry
    rest = [segment for segment in rest if segment]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        candidate = registry.lookup(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    info = registry.lookup(group, version, rest[0])
    if info is None or len(rest) > 3:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in info.subresources:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    if not info.namespaced and namespace is not None:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    if info.namespaced and namespace is None and name:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    return Target(info, namespace, name, sub)


async def core_resources(request: web.Request) -> web.StreamResponse:
    tail = request.match_info.get("tail", "")
    if not tail:
        found = discovery.api_resource_list(request.app[API_KEY].registry, "", "v1")
        return respond(found)
    return await dispatch(request, resolve(request, "", "v1", tail.split("/")))


async def group_resources(request: web.Request) -> web.StreamResponse:
    group = request.match_info["group"]
    version_name = request.match_info.get("version", "")
    tail = request.match_info.get("tail", "")
    registry = request.app[API_KEY].registry
    if not version_name:
        found = discovery.api_group(registry, group)
        if found is None:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        return respond(found)
    if not tail:
        listed = discovery.api_resource_list(registry, group, version_name)
        if listed is None:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        return respond(listed)
    return await dispatch(request, resolve(request, group, version_name, tail.split("/")))


def _options(request: web.Request) -> WriteOptions:
    query = request.query
    dry_run = query.getall("dryRun", [])
    for value in dry_run:
        if value != "All":
            raise errors.bad_request(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    validation = query.get("fieldValidation", "Warn") or "Warn"
    if validation not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(f'fieldValidation: Unsupported value: "{validation}": supported values: '
                                 '"Ignore", "Strict", "Warn"')
    grace = query.get("gracePeriodSeconds")
    return WriteOptions(
        dry_run=bool(dry_run),
        field_manager=query.get("fieldManager", ""),
        field_validation=validation,
        force=parse_bool(query.get("force"), "force"),
        user_agent=request.headers.get("User-Agent", ""),
        propagation_policy=query.get("propagationPolicy"),
        grace_period_seconds=int(grace) if grace and grace.lstrip("-").isdigit() else None,
    )


def _media_type(request: web.Request) -> str:
    return request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()


async def _decode(request: web.Request, allowed: tuple[str, ...], kind: str) -> Any:
    raw = await request.read()
    media = _media_type(request)
    if not media and JSON in allowed:
        media = JSON  # kube-apiserver decodes a body without Content-Type as JSON (Python client 37 omits it)
    if media not in allowed:
        raise errors.unsupported_media_type(media, list(allowed))
    if media == PROTOBUF:
        return protobuf.decode(raw)
    text = raw.decode("utf-8", errors="replace")
    if media in (YAML, PATCH_APPLY):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error decoding YAML: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc.msg} at line "
                                 f"{exc.lineno} column {exc.colno}") from exc


def _wants_table(request: web.Request) -> bool:
    return tables.parse_table_accept(request.headers.get("Accept", ""))


def _table(request: web.Request, target: Target, items: list[dict[str, Any]], rv: str) -> web.Response:
    include = request.query.get("includeObject", "Metadata") or "Metadata"
    body = tables.table(items, kind=target.info.kind, printer_columns=list(target.info.printer_columns) or None,
                        include_object=include, resource_version=rv, now=datetime.now(UTC),
                        api_version=target.info.group_version)
    return respond(body, content_type=f"{JSON};as=Table;v=v1;g=meta.k8s.io")


def _write_scale(api: ObjectApi, target: Target, scale: Any, opts: WriteOptions) -> web.Response:
    """PUT/PATCH of ``/scale``: store the Scale's replica count, answer with the new Scale."""
    namespace = target.namespace or ""
    current = api.get(target.info, namespace, target.name)
    outcome = api.update(target.info, namespace, target.name, scaling.scaled(current, scale), opts, "scale")
    return respond(scaling.to_scale(outcome.obj), outcome.code, warnings=outcome.warnings)


def _audit(request: web.Request, target: Target) -> None:
    audit = request.app[CONFIG_KEY].audit
    if audit is None:
        return
    watch = request.method == "GET" and request.query.get("watch", "") in TRUE_WORDS
    audit.record({
        "verb": rbac_verb(request.method, bool(target.name), watch),
        "group": target.info.group,
        "resource": target.info.plural + (f"/{target.subresource}" if target.subresource else ""),
        "namespace": target.namespace or "",
        "name": target.name,
        "userAgent": request.headers.get("User-Agent", ""),
    })


async def dispatch(request: web.Request, target: Target) -> web.StreamResponse:
    api = request.app[API_KEY]
    info, namespace = target.info, target.namespace
    method = request.method
    _audit(request, target)
    if method == "GET":
        if target.name:
            obj = api.get(info, namespace or "", target.name)
            if target.subresource == "scale":
                return respond(scaling.to_scale(obj))
            if _wants_table(request):
                return _table(request, target, [obj], str(obj["metadata"].get("resourceVersion", "")))
            return respond(obj)
        labels = parse_label_selector(request.query.get("labelSelector", ""))
        fields = parse_field_selector(request.query.get("fieldSelector", ""), kind=info.kind)
        if parse_bool(request.query.get("watch"), "watch"):
            return await watch.serve(request, api, info, namespace, labels, fields,
                                        request.app[CONFIG_KEY].bookmark_interval,
                                        table=_wants_table(request))
        limit_text = request.query.get("limit", "0") or "0"
        if not limit_text.isdigit():
            raise errors.bad_request(f"invalid limit {limit_text!r}")
        listed = api.list(info, namespace, labels, fields, int(limit_text), request.query.get("continue", ""))
        if _wants_table(request):
            return _table(request, target, listed["items"], listed["metadata"]["resourceVersion"])
        return respond(listed)
    opts = _options(request)
    if method == "POST":
        if target.name or (info.namespaced and namespace is None):
            raise errors.method_not_allowed()
        body = await _decode(request, BODY_TYPES, info.kind)
        outcome = api.create(info, namespace or "", body, opts)
        return respond(outcome.obj, outcome.code, warnings=outcome.warnings)
    if method == "PUT":
        if not target.name:
            raise errors.method_not_allowed()
        body = await _decode(request, BODY_TYPES, info.kind)
        if target.subresource == "scale":
            return _write_scale(api, target, body, opts)
        outcome = api.update(info, namespace or "", target.name, body, opts, target.subresource)
        return respond(outcome.obj, outcome.code, warnings=outcome.warnings)
    if method == "PATCH":
        if not target.name:
            raise errors.method_not_allowed()
        media = _media_type(request)
        allowed = tuple(t for t in PATCH_TYPES if not (info.custom and t == PATCH_STRATEGIC))
        patch = await _decode(request, allowed, info.kind)
        if target.subresource == "scale":
            current = scaling.to_scale(api.get(info, namespace or "", target.name))
            return _write_scale(api, target, scaling.patched_scale(current, media, patch), opts)
        outcome = api.patch(info, namespace or "", target.name, media, patch, opts, target.subresource)
        return respond(outcome.obj, outcome.code, warnings=outcome.warnings)
    if method == "DELETE":
        await _delete_options(request, opts)
        if not target.name:
            labels = parse_label_selector(request.query.get("labelSelector", ""))
            fields = parse_field_selector(request.query.get("fieldSelector", ""), kind=info.kind)
            return respond(api.delete_collection(info, namespace, labels, fields, opts))
        outcome = api.delete(info, namespace or "", target.name, opts)
        return respond(outcome.obj, outcome.code)
    raise errors.method_not_allowed()


async def _delete_options(request: web.Request, opts: WriteOptions) -> None:
    raw = await request.read()
    if not raw.strip():
        return
    media = _media_type(request)
    if media == PROTOBUF:
        body = protobuf.decode(raw)
    else:
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise errors.bad_request(f"invalid DeleteOptions: {exc.msg}") from exc
    if not isinstance(body, dict):
        raise errors.bad_request("invalid DeleteOptions: expected an object")
    if body.get("propagationPolicy"):
        opts.propagation_policy = str(body["propagationPolicy"])
    if body.get("orphanDependents") is True and not opts.propagation_policy:
        opts.propagation_policy = "Orphan"
    if body.get("dryRun"):
        opts.dry_run = True
    if isinstance(body.get("preconditions"), dict):
        opts.preconditions = dict(body["preconditions"])


def build_app(api: ObjectApi, config: ServerConfig) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=16 * 1024 * 1024)
    app[API_KEY] = api
    app[CONFIG_KEY] = config
    app.router.add_get("/version", version)
    for path in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(path, health)
    app.router.add_get("/api", core_root)
    app.router.add_get("/apis", groups_root)
    app.router.add_get("/openapi/v3", openapi_v3_index)
    app.router.add_get("/openapi/v3/{tail:.+}", openapi_v3_document)
    methods = ("GET", "POST", "PUT", "PATCH", "DELETE")
    for method in methods:
        app.router.add_route(method, "/api/v1", core_resources)
        app.router.add_route(method, "/api/v1/{tail:.+}", core_resources)
        app.router.add_route(method, "/apis/{group}", group_resources)
        app.router.add_route(method, "/apis/{group}/{version}", group_resources)
        app.router.add_route(method, "/apis/{group}/{version}/{tail:.+}", group_resources)
    app.router.add_route("*", "/{tail:.*}", not_found_route)
    return app
