"""Decoding a request the way kube-apiserver does: query flags, write options, selectors, bodies.

Real clients send more than JSON: query booleans parsed like Go's
``strconv.ParseBool``, YAML bodies (``kubectl create -f`` of some versions,
apply patches), protobuf bodies (client-go typed clients, see
:mod:`.protobuf`), bodies without any Content-Type (the Python client),
DeleteOptions in a DELETE body, and Accept headers asking for Tables.
Everything a handler needs from the request is decoded here, and every
malformed part becomes the 400 or 415 kube-apiserver would answer.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from aiohttp import web

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import protobuf, tables
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics.fieldselectors import FieldSelector, parse_field_selector
from hybrid_operator.localcluster.semantics.labelselectors import LabelSelector, parse_label_selector
from hybrid_operator.localcluster.semantics.writes import PATCH_APPLY, WriteOptions

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
BODY_TYPES = (JSON, YAML, PROTOBUF)
TRUE_WORDS = frozenset({"1", "t", "T", "TRUE", "true", "True"})
FALSE_WORDS = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(value: str | None, name: str) -> bool:
    """A boolean query parameter: absent or empty is false, anything ``strconv.ParseBool`` rejects is a 400."""
    if value is None or value == "":
        return False
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise errors.bad_request(f'invalid boolean value "{value}" for query parameter {name}')


def is_true(value: str | None) -> bool:
    """A lenient boolean flag: true only for the words ``strconv.ParseBool`` reads as true."""
    return value in TRUE_WORDS


def selectors(request: web.Request, info: ResourceInfo) -> tuple[LabelSelector, FieldSelector]:
    """The ``labelSelector`` and ``fieldSelector`` of a collection request."""
    labels = parse_label_selector(request.query.get("labelSelector", ""))
    fields = parse_field_selector(request.query.get("fieldSelector", ""), kind=info.kind)
    return labels, fields


def wants_table(request: web.Request) -> bool:
    return tables.parse_table_accept(request.headers.get("Accept", ""))


def write_options(request: web.Request) -> WriteOptions:
    """The query options of a POST, PUT, PATCH or DELETE."""
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


def media_type(request: web.Request) -> str:
    """The request's Content-Type without parameters, lower case."""
    return request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()


async def body(request: web.Request, allowed: tuple[str, ...]) -> Any:
    """The decoded body, in one of the ``allowed`` media types (415 otherwise)."""
    raw = await request.read()
    media = media_type(request)
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


async def read_delete_options(request: web.Request, opts: WriteOptions) -> None:
    """Complete ``opts`` from a DeleteOptions body (JSON or protobuf), if the DELETE has one."""
    raw = await request.read()
    if not raw.strip():
        return
    if media_type(request) == PROTOBUF:
        options = protobuf.decode(raw)
    else:
        try:
            options = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise errors.bad_request(f"invalid DeleteOptions: {exc.msg}") from exc
    if not isinstance(options, dict):
        raise errors.bad_request("invalid DeleteOptions: expected an object")
    if options.get("propagationPolicy"):
        opts.propagation_policy = str(options["propagationPolicy"])
    if options.get("orphanDependents") is True and not opts.propagation_policy:
        opts.propagation_policy = "Orphan"
    if options.get("dryRun"):
        opts.dry_run = True
    if isinstance(options.get("preconditions"), dict):
        opts.preconditions = dict(options["preconditions"])
