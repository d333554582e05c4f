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

import asyncio
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import yaml
from aiohttp import web

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import protobuf, tables, yamlbodies
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics import shardselectors
from hybrid_operator.localcluster.semantics.fieldselectors import FieldSelector, parse_field_selector
from hybrid_operator.localcluster.semantics.labelselectors import LabelSelector, parse_label_selector
from hybrid_operator.localcluster.semantics.shardselectors import ShardSelector
from hybrid_operator.localcluster.semantics.writes import PATCH_APPLY, WriteOptions

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
BODY_TYPES = (JSON, YAML, PROTOBUF)
MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's MaxRequestBodyBytes
YAML_INLINE_BYTES = 64 * 1024  # larger YAML bodies are parsed in a worker process
MAX_DEPTH = 128  # nesting of objects and lists in a body (deeper ones would exhaust Python's stack)
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


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def parse_int64(text: str) -> int:
    """An integer query parameter as kube-apiserver's parameter decoding reads it (Go's
    ``strconv.ParseInt(s, 10, 64)``): an optional sign and decimal digits, within int64; anything
    else is kube's 400 with Go's error text."""
    quoted = json.dumps(text, ensure_ascii=False)
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise errors.bad_request(f"strconv.ParseInt: parsing {quoted}: invalid syntax")
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise errors.bad_request(f"strconv.ParseInt: parsing {quoted}: value out of range")
    return value


def timeout_seconds(request: web.Request) -> int | None:
    """The ``timeoutSeconds`` of a LIST or WATCH (None when absent); not an int64: 400, as kube-apiserver answers."""
    text = request.query.get("timeoutSeconds")
    return None if text is None else parse_int64(text)


def is_true(value: str | None) -> bool:
    """A lenient boolean flag: true only for the words ``strconv.ParseBool`` reads as true."""
    return value in TRUE_WORDS


def selectors(request: web.Request, info: ResourceInfo) -> tuple[LabelSelector, FieldSelector]:
    """The ``labelSelector`` and ``fieldSelector`` of a collection request."""
    labels = parse_label_selector(request.query.get("labelSelector", ""))
    fields = parse_field_selector(request.query.get("fieldSelector", ""), kind=info.kind)
    return labels, fields


def limit(request: web.Request) -> int:
    """A LIST's ``limit`` (0: no limit); 400 when it is not a number."""
    text = request.query.get("limit", "0") or "0"
    if not text.isdigit():
        raise errors.bad_request(f"invalid limit {text!r}")
    return int(text)


def shard_selector(request: web.Request, enabled: bool) -> ShardSelector | None:
    """The ``shardSelector`` of a collection request (KEP-5866); None when absent or empty, and whatever its
    text when the feature is off (ignored silently, as kube-apiserver does with its gate off); a 500 when
    malformed (:func:`shardselectors.parse`)."""
    if not enabled:
        return None
    return shardselectors.parse(request.query.get("shardSelector", ""))


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


async def raw_body(request: web.Request) -> bytes:
    """The request body, refused with kube-apiserver's 413 when it is over 3 MiB (without reading it all)."""
    declared = request.content_length
    if declared is not None and declared > MAX_BODY_BYTES:
        raise errors.request_entity_too_large(f"limit is {MAX_BODY_BYTES}")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise errors.request_entity_too_large(f"limit is {MAX_BODY_BYTES}") from None
    if len(raw) > MAX_BODY_BYTES:
        raise errors.request_entity_too_large(f"limit is {MAX_BODY_BYTES}")
    return raw


async def body(request: web.Request, allowed: tuple[str, ...]) -> Any:
    """The decoded body, in one of the ``allowed`` media types (415 otherwise)."""
    raw = await raw_body(request)
    media = media_type(request)
    if not media and JSON in allowed:
        media = JSON  # kube-apiserver decodes a body without Content-Type as JSON (Python client 37 omits it)
    if media not in allowed:
        raise errors.unsupported_media_type(media, list(allowed))
    if media == PROTOBUF:
        return protobuf.decode(raw)
    text = raw.decode("utf-8", errors="replace")
    if media in (YAML, PATCH_APPLY):
        decoded = await _yaml_elsewhere(text) if len(raw) > YAML_INLINE_BYTES else _yaml(text)
    else:
        decoded = parse_json(text)
    check_depth(decoded)
    return decoded


class _YamlWorker:
    """One worker process for large YAML bodies, started on first use, stopped with the server.

    PyYAML needs seconds for a body of a few MiB and holds the GIL meanwhile
    (a thread would not help): in a separate process the event loop keeps
    serving everyone else.  forkserver: the worker is no copy of the server's threads.
    """

    pool: ProcessPoolExecutor | None = None

    @classmethod
    async def parse(cls, text: str) -> Any:
        if cls.pool is None:
            cls.pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("forkserver"))
        try:
            return await asyncio.get_running_loop().run_in_executor(cls.pool, _yaml, text)
        except BrokenProcessPool:
            cls.pool = None
            raise errors.bad_request("error decoding YAML: the YAML decoder stopped") from None

    @classmethod
    def stop(cls) -> None:
        if cls.pool is not None:
            cls.pool.shutdown(wait=False, cancel_futures=True)
            cls.pool = None


async def _yaml_elsewhere(text: str) -> Any:
    """A large YAML body, parsed in the worker process (see :class:`_YamlWorker`)."""
    return await _YamlWorker.parse(text)


def stop_yaml_worker() -> None:
    """Stop the YAML worker process, if one was started."""
    _YamlWorker.stop()


def _yaml(text: str) -> Any:
    try:
        return yamlbodies.load(text)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        detail = str(exc) if not isinstance(exc, RecursionError) else f"exceeded max depth of {MAX_DEPTH}"
        raise errors.bad_request(f"error decoding YAML: {detail}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"invalid character '{name[0]}' looking for beginning of value")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is out of range")
    return value


def parse_json(text: str) -> Any:
    """A JSON document as Go's ``encoding/json`` reads it: no NaN or Infinity, no number out of range."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc.msg} at line "
                                 f"{exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        detail = str(exc) if not isinstance(exc, RecursionError) else f"exceeded max depth of {MAX_DEPTH}"
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {detail}") from None


def check_depth(value: Any) -> None:
    """400 for objects and lists nested deeper than :data:`MAX_DEPTH` (no recursion: the stack stays small)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > MAX_DEPTH:
            raise errors.bad_request(f"the request body is nested deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


async def read_delete_options(request: web.Request, opts: WriteOptions) -> None:
    """Complete ``opts`` from a DeleteOptions body (JSON or protobuf), if the DELETE has one."""
    raw = await raw_body(request)
    if not raw.strip():
        return
    if media_type(request) == PROTOBUF:
        options = protobuf.decode(raw)
    else:
        try:
            options = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
        except (ValueError, RecursionError) as exc:
            raise errors.bad_request(f"invalid DeleteOptions: {exc}") from None
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
