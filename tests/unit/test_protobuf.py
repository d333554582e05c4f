"""Decoding of Kubernetes protobuf request bodies (``k8s\\x00`` envelope) into JSON dicts."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.localcluster.apiserver import protobuf
from hybrid_operator.localcluster.errors import ApiError

pytestmark = pytest.mark.unit

TRACES = Path("/work/shared/reference/client-traces")
HELM_PAYLOADS = sorted(TRACES.glob("helm-secret-*.pb"))

# --------------------------------------------------------------------------- a tiny encoder for fixtures


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 -> two's complement, 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def vint(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)


def blob(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return tag(number, 2) + varint(len(data)) + data


def msg(number: int, *parts: bytes) -> bytes:
    return blob(number, b"".join(parts))


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return msg(number, blob(1, key), blob(2, value))


def envelope(api_version: str, kind: str, raw: bytes, encoding: str = "") -> bytes:
    return (
        b"k8s\x00"
        + msg(1, blob(1, api_version), blob(2, kind))
        + blob(2, raw)
        + blob(3, encoding)
        + blob(4, "")
    )


def meta(*parts: bytes) -> bytes:
    return msg(1, *parts)


# --------------------------------------------------------------------------- real client payloads


@pytest.mark.parametrize("path", HELM_PAYLOADS, ids=lambda p: p.name)
def test_helm_release_secret(path: Path) -> None:
    obj = protobuf.decode(path.read_bytes())

    assert (obj["kind"], obj["apiVersion"], obj["type"]) == ("Secret", "v1", "helm.sh/release.v1")
    name = obj["metadata"]["name"]
    match = re.fullmatch(r"sh\.helm\.release\.v1\.(?P<rel>[a-z0-9-]+)\.v(?P<n>\d+)", name)
    assert match is not None
    labels = obj["metadata"]["labels"]
    assert labels["owner"] == "helm"
    assert labels["name"] == match["rel"]
    assert labels["version"] == match["n"]
    assert labels["status"] in {
        "pending-install",
        "pending-upgrade",
        "deployed",
        "superseded",
        "uninstalling",
    }
    # Secret data is base64 in JSON; helm's stored bytes are themselves base64 of gzipped JSON.
    release = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(obj["data"]["release"]))))
    assert release["name"] == match["rel"]
    assert release["version"] == int(match["n"])
    assert release["info"]["status"] == labels["status"]
    assert set(obj) == {"kind", "apiVersion", "metadata", "data", "type"}
    assert set(obj["metadata"]) == {"name", "labels"}  # empty strings, zero time and generation dropped


def _k12_bodies() -> dict[str, bytes]:
    bodies = {}
    for line in (TRACES / "k12.jsonl").read_text().splitlines():
        record = json.loads(line)
        body = record.get("body") or ""
        if record.get("m") == "POST" and body.startswith("PROTOBUF:"):
            bodies[record["path"].rsplit("/", 1)[-1]] = bytes.fromhex(body.removeprefix("PROTOBUF:"))
    return bodies


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (
            "namespaces",
            {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "foo"}, "spec": {}, "status": {}},
        ),
        (
            "configmaps",
            {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"}, "data": {"a": "b"}},
        ),
        (
            "secrets",
            {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s1"}, "data": {"a": "Yg=="}},
        ),
    ],
)
def test_kubectl_create_bodies(resource: str, expected: dict[str, Any]) -> None:
    assert protobuf.decode(_k12_bodies()[resource]) == expected


# --------------------------------------------------------------------------- hand-encoded objects

FULL_META = meta(
    blob(1, "cm1"),
    blob(2, "gen-"),
    blob(3, "ns1"),
    blob(5, "uid-1"),
    blob(6, "42"),
    vint(7, 3),
    msg(8, vint(1, 1_700_000_000), vint(2, 999_000_000)),
    msg(9, vint(1, 1_700_000_060)),
    vint(10, 0),
    entry(11, "app", "web"),
    entry(11, "tier", ""),
    entry(12, "note", "hello"),
    msg(
        13, blob(5, "apps/v1"), blob(1, "Deployment"), blob(3, "web"), blob(4, "u-2"), vint(6, 1), vint(7, 0)
    ),
    blob(14, "example.com/cleanup"),
    blob(14, "other"),
    msg(
        17,
        blob(1, "kubectl"),
        blob(2, "Apply"),
        blob(3, "v1"),
        msg(4, vint(1, 0)),
        blob(6, "FieldsV1"),
        msg(7, blob(1, '{"f:data":{"f:a":{}}}')),
        blob(8, ""),
    ),
)

EXPECTED_META = {
    "name": "cm1",
    "generateName": "gen-",
    "namespace": "ns1",
    "uid": "uid-1",
    "resourceVersion": "42",
    "generation": 3,
    "creationTimestamp": "2023-11-14T22:13:20Z",
    "deletionTimestamp": "2023-11-14T22:14:20Z",
    "deletionGracePeriodSeconds": 0,
    "labels": {"app": "web", "tier": ""},
    "annotations": {"note": "hello"},
    "ownerReferences": [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": "u-2",
            "controller": True,
            "blockOwnerDeletion": False,
        }
    ],
    "finalizers": ["example.com/cleanup", "other"],
    "managedFields": [
        {
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "1970-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}},
        }
    ],
}


def test_configmap_with_full_metadata() -> None:
    raw = FULL_META + vint(4, 0) + entry(2, "a", "1") + entry(2, "b", "two") + entry(3, "bin", b"\x00\xff")
    obj = protobuf.decode(envelope("v1", "ConfigMap", raw))
    assert obj == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": EXPECTED_META,
        "immutable": False,  # a Go *bool: present on the wire means present in JSON
        "data": {"a": "1", "b": "two"},
        "binaryData": {"bin": "AP8="},
    }


def test_secret_string_data_immutable_and_empty_value() -> None:
    raw = (
        meta(blob(1, "s"))
        + vint(5, 1)
        + entry(2, "empty", b"")
        + entry(4, "plain", "text")
        + blob(3, "Opaque")
    )
    assert protobuf.decode(envelope("v1", "Secret", raw)) == {
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": {"name": "s"},
        "immutable": True,
        "data": {"empty": ""},
        "stringData": {"plain": "text"},
        "type": "Opaque",
    }


def test_namespace_spec_and_status() -> None:
    condition = msg(2, blob(1, "NamespaceDeletionContentFailure"), blob(2, "False"), msg(4, vint(1, 86400)))
    raw = meta(blob(1, "team")) + msg(2, blob(1, "kubernetes")) + msg(3, blob(1, "Terminating"), condition)
    assert protobuf.decode(envelope("v1", "Namespace", raw)) == {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": "team"},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {
            "phase": "Terminating",
            "conditions": [
                {
                    "type": "NamespaceDeletionContentFailure",
                    "status": "False",
                    "lastTransitionTime": "1970-01-02T00:00:00Z",
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"", {}),
        (
            vint(1, 0)
            + msg(2, blob(1, "u"), blob(2, "7"))
            + vint(3, 0)
            + blob(4, "Foreground")
            + blob(5, "All"),
            {
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": "u", "resourceVersion": "7"},
                "orphanDependents": False,
                "propagationPolicy": "Foreground",
                "dryRun": ["All"],
            },
        ),
        (
            vint(1, -1) + msg(2) + blob(4, ""),
            {"gracePeriodSeconds": -1, "preconditions": {}, "propagationPolicy": ""},
        ),
        (blob(4, "Background"), {"propagationPolicy": "Background"}),
    ],
)
@pytest.mark.parametrize("api_version", ["v1", "meta.k8s.io/v1"])
def test_delete_options(api_version: str, raw: bytes, expected: dict[str, Any]) -> None:
    obj = protobuf.decode(envelope(api_version, "DeleteOptions", raw))
    assert obj == {"kind": "DeleteOptions", "apiVersion": api_version, **expected}


def test_zero_values_of_plain_fields_are_dropped() -> None:
    raw = meta(blob(1, "z"), blob(2, ""), vint(7, 0), msg(8)) + blob(3, "") + msg(1, blob(3, "late-ns"))
    # The second metadata occurrence merges into the first, as protobuf specifies.
    assert protobuf.decode(envelope("v1", "Secret", raw)) == {
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": {"name": "z", "namespace": "late-ns"},
    }


def test_unknown_fields_of_every_wire_type_are_skipped() -> None:
    unknown = vint(90, 5) + tag(91, 1) + b"\x01" * 8 + tag(92, 5) + b"\x02" * 4 + blob(93, "x")
    raw = unknown + meta(blob(1, "u"), vint(99, 1)) + entry(2, "k", "v")
    assert protobuf.decode(envelope("v1", "ConfigMap", raw))["data"] == {"k": "v"}


def test_last_value_wins_for_singular_scalars() -> None:
    raw = meta(blob(1, "first"), blob(1, "second"))
    assert protobuf.decode(envelope("v1", "ConfigMap", raw))["metadata"] == {"name": "second"}


def test_iter_wire_values() -> None:
    data = (
        vint(1, 300)
        + tag(2, 1)
        + (7).to_bytes(8, "little")
        + tag(3, 5)
        + (9).to_bytes(4, "little")
        + blob(4, "hi")
    )
    assert list(protobuf.iter_wire(data)) == [(1, 0, 300), (2, 1, 7), (3, 5, 9), (4, 2, b"hi")]


# --------------------------------------------------------------------------- errors

GOOD_CM = envelope("v1", "ConfigMap", meta(blob(1, "x")) + entry(2, "a", "b"))


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        (b"", 400, "magic prefix"),
        (b'{"kind":"ConfigMap"}', 400, "magic prefix"),
        (b"k8s\x00\x0a", 400, "unexpected EOF"),
        (b"k8s\x00\x0a\x05\x0a\x02v1", 400, "unexpected EOF"),
        (b"k8s\x00" + b"\xff" * 11, 400, "overflow"),
        (b"k8s\x00\x0b", 400, "illegal wireType 3"),
        (b"k8s\x00\x00\x00", 400, "illegal tag 0"),
        (b"k8s\x00" + vint(1, 3), 400, "wrong wireType"),
        (envelope("v1", "", b""), 400, "Kind"),
        (envelope("v1", "ConfigMap", meta(vint(1, 5))), 400, "must be of type ConfigMap"),
        (envelope("v1", "ConfigMap", meta(msg(8, blob(1, "x")))), 400, "wrong wireType"),
        (envelope("v1", "ConfigMap", meta(blob(11, b"\x0a\x05ab"))), 400, "unexpected EOF"),
        (envelope("v1", "ConfigMap", blob(2, b"\x08\x01")), 400, "map entry"),
        (envelope("v1", "ConfigMap", meta(blob(1, b"\xff\xfe"))), 400, "UTF-8"),
        (envelope("v1", "ConfigMap", meta(msg(17, msg(7, blob(1, "{not json"))))), 400, "fieldsV1"),
        (envelope("v1", "ConfigMap", meta(msg(8, vint(1, 10**15)))), 400, "out of range"),
        (envelope("v1", "Secret", vint(5, 1) + tag(2, 2) + varint(50)), 400, "must be of type Secret"),
        (envelope("apps/v1", "Deployment", b""), 415, "apps/v1, Kind=Deployment"),
        (envelope("example.com/v1", "Widget", b""), 415, "Kind=Widget"),
        (envelope("apps/v1", "ConfigMap", b""), 415, "apps/v1, Kind=ConfigMap"),
        (envelope("v1", "Pod", b""), 415, "v1, Kind=Pod"),
        (envelope("v1", "ConfigMap", b"", encoding="gzip"), 415, "contentEncoding 'gzip'"),
        (GOOD_CM[:-1], 400, "unexpected EOF"),
        (GOOD_CM[:12], 400, "unexpected EOF"),
    ],
)
def test_rejected_bodies(body: bytes, code: int, fragment: str) -> None:
    with pytest.raises(ApiError) as caught:
        protobuf.decode(body)
    assert caught.value.code == code
    assert fragment in caught.value.message
    assert caught.value.reason == ("BadRequest" if code == 400 else "UnsupportedMediaType")


def test_unsupported_kind_message_names_the_accepted_types() -> None:
    with pytest.raises(ApiError) as caught:
        protobuf.decode(envelope("apps/v1", "Deployment", b""))
    assert caught.value.message.startswith(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml"
    )
    assert "Secret, ConfigMap, Namespace and DeleteOptions" in caught.value.message


@pytest.mark.parametrize("cut", [5, 10, 30, 200, 800])
def test_truncated_helm_payload_is_a_bad_request(cut: int) -> None:
    body = HELM_PAYLOADS[0].read_bytes()[:cut]
    with pytest.raises(ApiError) as caught:
        protobuf.decode(body)
    assert caught.value.code == 400
