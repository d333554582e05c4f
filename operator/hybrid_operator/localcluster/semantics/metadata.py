"""ObjectMeta rules every write applies, whatever the kind.

Before any kind-specific rule runs, kube-apiserver checks and completes the
body's type and object metadata (its ``rest.BeforeCreate``/``BeforeUpdate``):
apiVersion and kind match the URL, the namespace matches the request's,
labels and annotations map strings to strings, the name is a DNS subdomain
or is generated from ``generateName``; fields only the server sets (uid,
creationTimestamp, resourceVersion, generation, deletion*) are dropped from a
new object and keep their stored values on update; a resourceVersion in the
body is a precondition; and an object being deleted accepts no new finalizer.
"""

from __future__ import annotations

import copy
import random
import re
import uuid
from collections.abc import Callable
from typing import Any

from hybrid_operator.localcluster import clock, errors
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics import builtinschemas, normalizing, typed

NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SERVER_MANAGED_META = ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp",
                       "deletionGracePeriodSeconds", "selfLink")
KEPT_ON_UPDATE = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace")
# RBAC objects are named like "system:controller:x", which is no DNS subdomain.
PATH_SEGMENT_NAMED = ("rolebindings", "roles", "clusterroles", "clusterrolebindings")


def checked_body(info: ResourceInfo, namespace: str, body: Any) -> dict[str, Any]:
    """A private copy of a client's body, with apiVersion, kind and namespace checked and filled in.

    Values Go would not decode into the kind's struct raise :class:`~.typed.TypeMismatch`
    (the caller answers 400, or 422 for a patch).
    """
    if not isinstance(body, dict):
        raise _undecodable(info, "the body must be a JSON object")
    typed.check(body, info.kind, info.group_version)
    obj = copy.deepcopy(body)
    _set_type_meta(info, obj)
    normalizing.normalize(obj, builtin=not info.custom and not builtinschemas.covers(info.group, info.version,
                                                                                      info.kind))
    if obj.get("metadata") is None:
        obj["metadata"] = {}
    _set_namespace(info, namespace, obj["metadata"])
    return obj


def _undecodable(info: ResourceInfo, detail: str) -> errors.ApiError:
    return errors.undecodable(info.kind, info.version, detail)


def check_name_matches(obj: dict[str, Any], name: str, *, required: bool = False) -> None:
    """400 when the body names another object than the URL (kube-apiserver's ``checkName``).

    A PUT or apply body may leave the name out (the URL's is used); a patch that removed it did not.
    """
    given = obj["metadata"].get("name")
    if given is None and not required:
        return
    given = given or ""
    if given != name:
        raise errors.bad_request(f"the name of the object ({given}) does not match the name on the URL ({name})")


def check_uid_precondition(info: ResourceInfo, existing: dict[str, Any], obj: dict[str, Any]) -> None:
    """A uid in a PUT body is a precondition on the stored object: 409 when it names another object."""
    wanted, stored = obj["metadata"].get("uid"), existing["metadata"].get("uid")
    if wanted and wanted != stored:
        name, ns = str(existing["metadata"]["name"]), str(existing["metadata"].get("namespace") or "")
        key = "/".join(part for part in ("/registry", info.storage_key.lstrip("/"), ns, name) if part)
        resource = errors.qualified(info.plural, info.group)
        raise errors.ApiError(409, "Conflict", f'Operation cannot be fulfilled on {resource} '
                              f'"{name}": StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, '
                              f"AdditionalErrorMsg: Precondition failed: UID in precondition: {wanted}, "
                              f"UID in object meta: {stored}",
                              {"name": name, "group": info.group, "kind": info.plural})


def check_uid_unchanged(info: ResourceInfo, existing: dict[str, Any], obj: dict[str, Any]) -> None:
    """A patch cannot change the uid: 422 ``field is immutable``, as ``ValidateObjectMetaUpdate`` answers."""
    wanted, stored = obj["metadata"].get("uid"), existing["metadata"].get("uid")
    if wanted and wanted != stored:
        raise errors.invalid(info.kind, info.group, str(existing["metadata"]["name"]), [{
            "reason": "FieldValueInvalid", "field": "metadata.uid",
            "message": f'Invalid value: "{wanted}": field is immutable'}])


def _set_type_meta(info: ResourceInfo, obj: dict[str, Any]) -> None:
    api_version = obj.get("apiVersion")
    if api_version and api_version != info.group_version:
        raise errors.bad_request(f"the API version in the data ({api_version}) does not match the "
                                 f"expected API version ({info.group_version})")
    kind = obj.get("kind")
    if kind and kind != info.kind:
        raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind ({info.kind})")
    obj["apiVersion"] = info.group_version
    obj["kind"] = info.kind


def _set_namespace(info: ResourceInfo, namespace: str, meta: dict[str, Any]) -> None:
    if not info.namespaced:
        meta.pop("namespace", None)
        return
    given = meta.get("namespace")
    if given and given != namespace:
        raise errors.bad_request("the namespace of the provided object does not match the namespace "
                                 "sent on the request")
    meta["namespace"] = namespace


def check_name(info: ResourceInfo, name: str) -> None:
    problem = ""
    if len(name) > 253:
        problem = "must be no more than 253 characters"
    elif not DNS_SUBDOMAIN.match(name) and info.plural not in PATH_SEGMENT_NAMED:
        problem = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                   "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
                   "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    if problem:
        raise errors.invalid(info.kind, info.group, name, [{
            "reason": "FieldValueInvalid", "field": "metadata.name",
            "message": f'Invalid value: "{name}": {problem}'}])


def name_for_create(info: ResourceInfo, meta: dict[str, Any], taken: Callable[[str], bool]) -> str:
    """``metadata.name``, or a free name made from ``generateName`` (set in ``meta`` too)."""
    if not meta.get("name"):
        prefix = meta.get("generateName")
        if not prefix:
            raise errors.invalid(info.kind, info.group, "", [{
                "reason": "FieldValueRequired", "field": "metadata.name",
                "message": "Required value: name or generateName is required"}])
        meta["name"] = _generated_name(str(prefix), taken)
    return str(meta["name"])


def _generated_name(prefix: str, taken: Callable[[str], bool]) -> str:
    for _ in range(20):
        candidate = prefix + "".join(random.choices(NAME_SUFFIX_ALPHABET, k=5))
        if not taken(candidate):
            return candidate
    raise errors.ApiError(500, "AlreadyExists", f"could not generate a unique name from {prefix!r}")


def drop_server_fields(obj: dict[str, Any]) -> None:
    """Forget what a client sent for fields only the server sets."""
    meta = obj["metadata"]
    for key in SERVER_MANAGED_META:
        meta.pop(key, None)


def stamp_created(info: ResourceInfo, obj: dict[str, Any]) -> None:
    """The fields the server sets on a new object: uid, creationTimestamp, generation 1."""
    meta = obj["metadata"]
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = clock.now_rfc3339()
    if info.has_generation:
        meta["generation"] = 1


def keep_server_fields(existing: dict[str, Any], new: dict[str, Any]) -> None:
    """An update cannot change what the server set at creation or deletion: keep the stored values."""
    meta, old = new["metadata"], existing["metadata"]
    for key in KEPT_ON_UPDATE:
        if key in old:
            meta[key] = old[key]
        else:
            meta.pop(key, None)


def check_resource_version(info: ResourceInfo, existing: dict[str, Any], wanted: Any) -> None:
    """A resourceVersion in the body is a precondition: 409 Conflict when the stored object moved on."""
    if wanted and str(wanted) != existing["metadata"]["resourceVersion"]:
        raise errors.conflict(info.plural, info.group, str(existing["metadata"]["name"]))


def check_no_new_finalizers(info: ResourceInfo, existing: dict[str, Any], new: dict[str, Any]) -> None:
    """An object that is being deleted accepts no new finalizer."""
    old = existing["metadata"]
    if not old.get("deletionTimestamp"):
        return
    added = set(new["metadata"].get("finalizers") or []) - set(old.get("finalizers") or [])
    if added:
        raise errors.invalid(info.kind, info.group, str(old["name"]), [{
            "reason": "FieldValueForbidden", "field": "metadata.finalizers",
            "message": "Forbidden: no new finalizers can be added if the object is being deleted, "
                       f"found new finalizers {sorted(added)!r}"}])
