"""What decoding a body into kube-apiserver's Go structs would reject, for the parts every object shares.

kube-apiserver never stores the JSON it was sent: it decodes it into Go
structs first, and a value of the wrong JSON type stops the request with
``json: cannot unmarshal number into Go struct field ConfigMap.data of type
string``.  A 400 BadRequest for POST and PUT (``ConfigMap in version "v1"
cannot be handled as a ConfigMap: ...``), a 422 Invalid on field ``patch``
when a PATCH produced the bad value.  This module checks what every kind
decodes the same way -- ``metadata`` (ObjectMeta) -- and the string maps of
ConfigMaps and Secrets; :class:`TypeMismatch` carries Go's wording and the
callers in :mod:`.crud` pick the status code.

Go's path in these messages names the innermost struct and omits list
indices and map keys (``ObjectMeta.metadata.ownerReferences.uid``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any


class TypeMismatch(Exception):
    """A value Go's ``encoding/json`` would refuse to decode; ``str()`` is Go's message."""


Check = Callable[[Any, str, str], None]  # (value, struct name, path)


def json_kind(value: Any) -> str:
    """The JSON type name Go's decoder uses in its errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _mismatch(value: Any, struct: str, path: str, go_type: str) -> TypeMismatch:
    shown = json_kind(value)
    if shown == "number" and go_type.startswith(("int", "uint")):
        shown = f"number {value}"
    return TypeMismatch(f"json: cannot unmarshal {shown} into Go struct field {struct}.{path} of type {go_type}")


def string(value: Any, struct: str, path: str) -> None:
    if value is not None and not isinstance(value, str):
        raise _mismatch(value, struct, path, "string")


def boolean(value: Any, struct: str, path: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise _mismatch(value, struct, path, "bool")


def int64(value: Any, struct: str, path: str) -> None:
    if value is None:
        return
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise _mismatch(value, struct, path, "int64")


def string_map(value: Any, struct: str, path: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise _mismatch(value, struct, path, "map[string]string")
    for item in value.values():
        string(item, struct, path)


def string_list(value: Any, struct: str, path: str) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        raise _mismatch(value, struct, path, "[]string")
    for item in value:
        string(item, struct, path)


def _struct(name: str, go_type: str, fields: dict[str, Check]) -> Check:
    """A check for a JSON object decoded into the Go struct ``name`` (its fields' checks by JSON name)."""
    def check(value: Any, struct: str, path: str) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            raise _mismatch(value, struct, path, go_type)
        for key, field_check in fields.items():
            if key in value:
                field_check(value[key], name, f"{path}.{key}")
    return check


def _list_of(element: Check, go_type: str) -> Check:
    def check(value: Any, struct: str, path: str) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            raise _mismatch(value, struct, path, go_type)
        for item in value:
            element(item, struct, path)
    return check


def _any_object(go_type: str) -> Check:
    def check(value: Any, struct: str, path: str) -> None:
        if value is not None and not isinstance(value, dict):
            raise _mismatch(value, struct, path, go_type)
    return check


OWNER_REFERENCE = _struct("OwnerReference", "v1.OwnerReference", {
    "apiVersion": string, "kind": string, "name": string, "uid": string,
    "controller": boolean, "blockOwnerDeletion": boolean,
})
MANAGED_FIELDS_ENTRY = _struct("ManagedFieldsEntry", "v1.ManagedFieldsEntry", {
    "manager": string, "operation": string, "apiVersion": string, "time": string, "fieldsType": string,
    "fieldsV1": _any_object("v1.FieldsV1"), "subresource": string,
})
OBJECT_META = _struct("ObjectMeta", "v1.ObjectMeta", {
    "name": string, "generateName": string, "namespace": string, "selfLink": string, "uid": string,
    "resourceVersion": string, "generation": int64, "creationTimestamp": string, "deletionTimestamp": string,
    "deletionGracePeriodSeconds": int64, "labels": string_map, "annotations": string_map,
    "ownerReferences": _list_of(OWNER_REFERENCE, "[]v1.OwnerReference"),
    "finalizers": string_list,
    "managedFields": _list_of(MANAGED_FIELDS_ENTRY, "[]v1.ManagedFieldsEntry"),
})


def _base64_map(value: Any, struct: str, path: str) -> None:
    """``map[string][]byte``: base64 strings (Go decodes them at once, and refuses bad ones)."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise _mismatch(value, struct, path, "map[string][]uint8")
    for item in value.values():
        if item is None:
            continue
        if not isinstance(item, str):
            raise _mismatch(item, struct, path, "[]uint8")
        try:
            base64.b64decode(item, validate=True)
        except (binascii.Error, ValueError):
            raise TypeMismatch(f"illegal base64 data at input byte {_bad_base64_offset(item)}") from None


def _bad_base64_offset(text: str) -> int:
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    for index, char in enumerate(text):
        if char not in alphabet:
            return index
    return len(text) - len(text) % 4


# Per (apiVersion, kind): the top-level fields whose Go types are checked here (besides metadata).
KIND_FIELDS: dict[tuple[str, str], tuple[str, dict[str, Check]]] = {
    ("v1", "ConfigMap"): ("ConfigMap", {"data": string_map, "binaryData": _base64_map, "immutable": boolean}),
    ("v1", "Secret"): ("Secret", {"data": _base64_map, "stringData": string_map, "type": string,
                                  "immutable": boolean}),
}


def check(obj: dict[str, Any], kind: str, api_version: str) -> None:
    """Raise :class:`TypeMismatch` for the first value Go would not decode (metadata, ConfigMap/Secret data)."""
    if "metadata" in obj:
        OBJECT_META(obj["metadata"], kind, "metadata")
    known = KIND_FIELDS.get((api_version, kind))
    if known is None:
        return
    struct, fields = known
    for key, field_check in fields.items():
        if key in obj:
            field_check(obj[key], struct, key)
