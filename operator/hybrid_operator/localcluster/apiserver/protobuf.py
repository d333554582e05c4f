"""Decode Kubernetes protobuf request bodies into the JSON dicts kube-apiserver would see.

client-go typed clients (helm v4 release storage, ``kubectl create ns|configmap|secret``)
send ``Content-Type: application/vnd.kubernetes.protobuf`` with no way to turn it off,
so the embedded server must read that encoding for the kinds those clients write:
Secret, ConfigMap, Namespace and DeleteOptions.  Everything else answers 415.

A body is the magic ``k8s\\x00`` followed by a ``runtime.Unknown`` message
(typeMeta{apiVersion 1, kind 2}, raw 2, contentEncoding 3, contentType 4) whose
``raw`` bytes are the object.  The wire reader is generic; each message type is a
small table of field number -> (JSON name, field type), taken from the Go struct
``protobuf:"…"`` tags.  Zero values of plain Go fields are dropped (they carry
``omitempty``), while Go pointer fields keep any value that is on the wire.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from hybrid_operator.localcluster import clock, errors

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# --------------------------------------------------------------------------- wire format

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_MAX_VARINT_BYTES = 10


class DecodeError(Exception):
    """Truncated or malformed protobuf data."""


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    for index in range(_MAX_VARINT_BYTES):
        if pos + index >= len(data):
            raise DecodeError("unexpected EOF")
        byte = data[pos + index]
        result |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return result, pos + index + 1
    raise DecodeError("integer overflow")


def _take(data: bytes, pos: int, size: int) -> tuple[bytes, int]:
    end = pos + size
    if size < 0 or end > len(data):
        raise DecodeError("unexpected EOF")
    return data[pos:end], end


def iter_wire(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield ``(field number, wire type, value)``: an int for varints and fixed, bytes otherwise."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number <= 0:
            raise DecodeError(f"illegal tag {number} (wire type {wire_type})")
        value: int | bytes
        if wire_type == _VARINT:
            value, pos = _read_varint(data, pos)
        elif wire_type == _BYTES:
            size, pos = _read_varint(data, pos)
            value, pos = _take(data, pos, size)
        elif wire_type == _FIXED64:
            raw, pos = _take(data, pos, 8)
            value = int.from_bytes(raw, "little")
        elif wire_type == _FIXED32:
            raw, pos = _take(data, pos, 4)
            value = int.from_bytes(raw, "little")
        else:
            raise DecodeError(f"illegal wireType {wire_type} for field {number}")
        yield number, wire_type, value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# --------------------------------------------------------------------------- message tables


class Kind(Enum):
    """How a field's wire value becomes JSON."""

    STRING = "string"
    BYTES = "bytes"  # base64 text, as Go's encoding/json writes []byte
    BOOL = "bool"
    INT = "int"  # int32/int64 varint
    MESSAGE = "message"
    TIME = "time"  # metav1.Time -> RFC 3339, seconds precision, UTC
    RAW_JSON = "raw_json"  # metav1.FieldsV1{Raw 1} -> the JSON document its Raw bytes hold
    STRING_MAP = "string_map"  # map<string, string>
    BYTES_MAP = "bytes_map"  # map<string, bytes> -> base64 strings


_VARINT_KINDS = frozenset({Kind.BOOL, Kind.INT})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Field:
    """One message field: JSON name, how to decode it, and Go's presence rules."""

    name: str
    kind: Kind
    repeated: bool = False
    pointer: bool = False
    """A Go pointer field: any value on the wire is kept, zero included."""
    message: Message | None = None


@dataclass(frozen=True)
class Message:
    """A message type: its Go name (for errors) and fields in Go struct order."""

    name: str
    fields: dict[int, Field]


_FIELDS_V1 = Field("fieldsV1", Kind.RAW_JSON, pointer=True)

MANAGED_FIELDS_ENTRY = Message(
    "ManagedFieldsEntry",
    {
        1: Field("manager", Kind.STRING),
        2: Field("operation", Kind.STRING),
        3: Field("apiVersion", Kind.STRING),
        4: Field("time", Kind.TIME, pointer=True),
        6: Field("fieldsType", Kind.STRING),
        7: _FIELDS_V1,
        8: Field("subresource", Kind.STRING),
    },
)

OWNER_REFERENCE = Message(
    "OwnerReference",
    {
        5: Field("apiVersion", Kind.STRING),
        1: Field("kind", Kind.STRING),
        3: Field("name", Kind.STRING),
        4: Field("uid", Kind.STRING),
        6: Field("controller", Kind.BOOL, pointer=True),
        7: Field("blockOwnerDeletion", Kind.BOOL, pointer=True),
    },
)

OBJECT_META = Message(
    "ObjectMeta",
    {
        1: Field("name", Kind.STRING),
        2: Field("generateName", Kind.STRING),
        3: Field("namespace", Kind.STRING),
        4: Field("selfLink", Kind.STRING),
        5: Field("uid", Kind.STRING),
        6: Field("resourceVersion", Kind.STRING),
        7: Field("generation", Kind.INT),
        8: Field("creationTimestamp", Kind.TIME),
        9: Field("deletionTimestamp", Kind.TIME, pointer=True),
        10: Field("deletionGracePeriodSeconds", Kind.INT, pointer=True),
        11: Field("labels", Kind.STRING_MAP),
        12: Field("annotations", Kind.STRING_MAP),
        13: Field("ownerReferences", Kind.MESSAGE, repeated=True, message=OWNER_REFERENCE),
        14: Field("finalizers", Kind.STRING, repeated=True),
        17: Field("managedFields", Kind.MESSAGE, repeated=True, message=MANAGED_FIELDS_ENTRY),
    },
)

_METADATA = Field("metadata", Kind.MESSAGE, message=OBJECT_META)

SECRET = Message(
    "Secret",
    {
        1: _METADATA,
        5: Field("immutable", Kind.BOOL, pointer=True),
        2: Field("data", Kind.BYTES_MAP),
        4: Field("stringData", Kind.STRING_MAP),
        3: Field("type", Kind.STRING),
    },
)

CONFIG_MAP = Message(
    "ConfigMap",
    {
        1: _METADATA,
        4: Field("immutable", Kind.BOOL, pointer=True),
        2: Field("data", Kind.STRING_MAP),
        3: Field("binaryData", Kind.BYTES_MAP),
    },
)

NAMESPACE_CONDITION = Message(
    "NamespaceCondition",
    {
        1: Field("type", Kind.STRING),
        2: Field("status", Kind.STRING),
        4: Field("lastTransitionTime", Kind.TIME),
        5: Field("reason", Kind.STRING),
        6: Field("message", Kind.STRING),
    },
)

NAMESPACE = Message(
    "Namespace",
    {
        1: _METADATA,
        2: Field(
            "spec",
            Kind.MESSAGE,
            message=Message("NamespaceSpec", {1: Field("finalizers", Kind.STRING, repeated=True)}),
        ),
        3: Field(
            "status",
            Kind.MESSAGE,
            message=Message(
                "NamespaceStatus",
                {
                    1: Field("phase", Kind.STRING),
                    2: Field("conditions", Kind.MESSAGE, repeated=True, message=NAMESPACE_CONDITION),
                },
            ),
        ),
    },
)

PRECONDITIONS = Message(
    "Preconditions",
    {
        1: Field("uid", Kind.STRING, pointer=True),
        2: Field("resourceVersion", Kind.STRING, pointer=True),
    },
)

DELETE_OPTIONS = Message(
    "DeleteOptions",
    {
        1: Field("gracePeriodSeconds", Kind.INT, pointer=True),
        2: Field("preconditions", Kind.MESSAGE, pointer=True, message=PRECONDITIONS),
        3: Field("orphanDependents", Kind.BOOL, pointer=True),
        4: Field("propagationPolicy", Kind.STRING, pointer=True),
        5: Field("dryRun", Kind.STRING, repeated=True),
    },
)

CORE_KINDS: dict[str, Message] = {"Secret": SECRET, "ConfigMap": CONFIG_MAP, "Namespace": NAMESPACE}
"""core/v1 kinds whose protobuf bodies are understood."""

# --------------------------------------------------------------------------- message decoding


def decode_message(data: bytes, message: Message) -> dict[str, Any]:
    """Decode one message to its JSON form, fields in Go struct order."""
    collected: dict[int, list[int | bytes]] = {}
    for number, wire_type, value in iter_wire(data):
        spec = message.fields.get(number)
        if spec is None:
            continue  # unknown fields are skipped, as the Go decoder does
        expected = _VARINT if spec.kind in _VARINT_KINDS else _BYTES
        if wire_type != expected:
            raise DecodeError(f"wrong wireType = {wire_type} for field {_go_name(spec)} of {message.name}")
        collected.setdefault(number, []).append(value)
    out: dict[str, Any] = {}
    for number, spec in message.fields.items():
        if number in collected:
            _store(out, spec, collected[number])
    return out


def _go_name(spec: Field) -> str:
    return spec.name[:1].upper() + spec.name[1:]


def _store(out: dict[str, Any], spec: Field, values: list[int | bytes]) -> None:
    if spec.repeated:
        out[spec.name] = [_scalar(spec, value) for value in values]
    elif spec.kind in (Kind.STRING_MAP, Kind.BYTES_MAP):
        entries = dict(_map_entry(spec, _as_bytes(value)) for value in values)
        if entries:
            out[spec.name] = entries
    elif spec.kind is Kind.MESSAGE:
        # Repeated occurrences of a singular message merge, i.e. decode as one concatenation.
        out[spec.name] = _scalar(spec, b"".join(_as_bytes(v) for v in values))
    else:
        value = _scalar(spec, values[-1])  # last one wins for singular scalars
        if value is not None and (spec.pointer or not _is_zero(value)):
            out[spec.name] = value


def _is_zero(value: Any) -> bool:
    return value in ("", 0, False)


def _as_bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise DecodeError("expected a length-delimited value")
    return value


def _as_int(value: int | bytes) -> int:
    if not isinstance(value, int):
        raise DecodeError("expected a varint")
    return value


def _scalar(spec: Field, value: int | bytes) -> Any:
    kind = spec.kind
    if kind is Kind.BOOL:
        return _as_int(value) != 0
    if kind is Kind.INT:
        return _signed64(_as_int(value))
    raw = _as_bytes(value)
    if kind is Kind.STRING:
        return _text(raw)
    if kind is Kind.BYTES:
        return base64.b64encode(raw).decode("ascii")
    if kind is Kind.MESSAGE:
        if spec.message is None:
            raise DecodeError(f"field {spec.name} has no message table")
        return decode_message(raw, spec.message)
    if kind is Kind.TIME:
        return _time(raw)
    if kind is Kind.RAW_JSON:
        return _raw_json(raw)
    raise DecodeError(f"field {spec.name} cannot hold a single value")


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in string field: {exc.reason}") from None


def _map_entry(spec: Field, raw: bytes) -> tuple[str, str]:
    key, value = "", b""
    for number, wire_type, item in iter_wire(raw):
        if wire_type != _BYTES:
            raise DecodeError(f"wrong wireType = {wire_type} for map entry of {spec.name}")
        if number == 1:
            key = _text(_as_bytes(item))
        elif number == 2:
            value = _as_bytes(item)
    if spec.kind is Kind.BYTES_MAP:
        return key, base64.b64encode(value).decode("ascii")
    return key, _text(value)


def _time(raw: bytes) -> str | None:
    """metav1.Time: an empty message is Go's zero time, which JSON leaves out."""
    seconds = nanos = 0
    for number, wire_type, item in iter_wire(raw):
        if wire_type != _VARINT:
            raise DecodeError(f"wrong wireType = {wire_type} for field of Time")
        if number == 1:
            seconds = _signed64(_as_int(item))
        elif number == 2:
            nanos = _signed64(_as_int(item))
    if not raw:
        return None
    try:
        moment = _EPOCH + timedelta(seconds=seconds)
    except OverflowError:
        raise DecodeError(f"timestamp out of range: {seconds}s {nanos}ns") from None
    return clock.rfc3339(moment)


def _raw_json(raw: bytes) -> Any:
    """metav1.FieldsV1{Raw 1}: the JSON document held in its Raw bytes."""
    document = b""
    for number, wire_type, item in iter_wire(raw):
        if number == 1:
            if wire_type != _BYTES:
                raise DecodeError(f"wrong wireType = {wire_type} for field Raw of FieldsV1")
            document = _as_bytes(item)
    if not document:
        return {}
    try:
        return json.loads(document)
    except ValueError as exc:
        raise DecodeError(f"fieldsV1 is not JSON: {exc}") from None


# --------------------------------------------------------------------------- the envelope

_ACCEPTED = ["application/json", "application/yaml"]
_PROTOBUF_KINDS = "v1 Secret, ConfigMap, Namespace and DeleteOptions"


_ALTERNATIVE = ("this embedded cluster decodes no protobuf for it: send JSON or YAML instead, e.g. "
                "`kubectl create deployment web --image=nginx --dry-run=client -o yaml | kubectl apply -f -`")


def unsupported(what: str) -> errors.ApiError:
    """415 for a protobuf body this server cannot read, saying what works instead.

    ``kubectl create deployment|service|job|...`` sends protobuf; no kept library
    carries the protobuf descriptors of the built-in kinds (see README), so the
    answer names the working alternative: the same command rendered client-side
    and applied (JSON).
    """
    base = errors.unsupported_media_type(CONTENT_TYPE, _ACCEPTED)
    return errors.ApiError(
        base.code,
        base.reason,
        f"{base.message} ({CONTENT_TYPE} is accepted only for {_PROTOBUF_KINDS}, not {what}; {_ALTERNATIVE})",
    )


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object dict for a ``k8s\\x00``-framed protobuf request body.

    Raises a 415 ApiError for kinds other than Secret, ConfigMap, Namespace and
    DeleteOptions, and a 400 ApiError for a missing envelope or garbled data.
    """
    if not body.startswith(MAGIC):
        raise errors.bad_request(
            "the protobuf request body does not start with the Kubernetes magic prefix 'k8s\\x00'"
        )
    try:
        envelope = _open_envelope(body[len(MAGIC) :])
    except DecodeError as exc:
        raise errors.bad_request(f"unable to decode the protobuf request body: proto: {exc}") from None
    if envelope.content_encoding:
        raise unsupported(f"contentEncoding {envelope.content_encoding!r}")
    message = _message_for(envelope.api_version, envelope.kind)
    try:
        obj = decode_message(envelope.raw, message)
    except DecodeError as exc:
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {envelope.kind}): proto: {exc}"
        ) from None
    head = {"kind": envelope.kind}
    if envelope.api_version:
        head["apiVersion"] = envelope.api_version
    return {**head, **obj}


@dataclass(frozen=True)
class Envelope:
    """runtime.Unknown: typeMeta{apiVersion 1, kind 2}, raw 2, contentEncoding 3, contentType 4."""

    api_version: str = ""
    kind: str = ""
    raw: bytes = b""
    content_encoding: str = ""
    content_type: str = ""


def _open_envelope(data: bytes) -> Envelope:
    fields: dict[int, bytes] = {}
    for number, wire_type, value in iter_wire(data):
        if number in (1, 2, 3, 4):
            if wire_type != _BYTES:
                raise DecodeError(f"wrong wireType = {wire_type} for field {number} of Unknown")
            fields[number] = _as_bytes(value)
    type_meta: dict[int, bytes] = {}
    for number, wire_type, value in iter_wire(fields.get(1, b"")):
        if number in (1, 2):
            if wire_type != _BYTES:
                raise DecodeError(f"wrong wireType = {wire_type} for field {number} of TypeMeta")
            type_meta[number] = _as_bytes(value)
    return Envelope(
        api_version=_text(type_meta.get(1, b"")),
        kind=_text(type_meta.get(2, b"")),
        raw=fields.get(2, b""),
        content_encoding=_text(fields.get(3, b"")),
        content_type=_text(fields.get(4, b"")),
    )


def _message_for(api_version: str, kind: str) -> Message:
    if not kind:
        raise errors.bad_request("Object 'Kind' is missing in the protobuf request body")
    if kind == "DeleteOptions":
        return DELETE_OPTIONS
    message = CORE_KINDS.get(kind)
    if message is None or api_version != "v1":
        shown = f"{api_version}, Kind={kind}" if api_version else f"Kind={kind}"
        raise unsupported(shown)
    return message
