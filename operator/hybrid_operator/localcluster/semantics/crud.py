"""The object semantics of kube-apiserver: create, read, update, patch, delete.

This is where the rules of the Kubernetes API live, independent of HTTP:
names and generateName, uid and timestamps, generation bumps, the status
subresource split, finalizers and deletionTimestamp, preconditions and
conflicts, no-op writes, CRD schemas (pruning, defaulting, validation),
built-in defaulting, managedFields, dry runs, and CRD registration.  The HTTP
layer decodes requests into calls here and encodes what comes back.
"""

from __future__ import annotations

import base64
import builtins
import copy
import json
import random
import re
import string
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.resources import Registry, ResourceInfo, storage_version
from hybrid_operator.localcluster.semantics import applying, defaulting, patching, schema
from hybrid_operator.localcluster.semantics.selectors import FieldSelector, LabelSelector
from hybrid_operator.localcluster.storage.store import Store

CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions"
NAMESPACE_KEY = "/namespaces"
NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SERVER_MANAGED_META = ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp",
                       "deletionGracePeriodSeconds", "selfLink")

PATCH_MERGE = "application/merge-patch+json"
PATCH_JSON = "application/json-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (PATCH_JSON, PATCH_MERGE, PATCH_STRATEGIC, PATCH_APPLY)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class WriteOptions:
    """Query options of a write (POST, PUT, PATCH, DELETE)."""

    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = "Warn"
    force: bool = False
    user_agent: str = ""
    propagation_policy: str | None = None
    grace_period_seconds: int | None = None
    preconditions: dict[str, Any] = field(default_factory=dict)

    def manager(self) -> str:
        if self.field_manager:
            return self.field_manager
        agent = self.user_agent.split("/", 1)[0].strip()
        return agent or "unknown"


@dataclass
class Outcome:
    """What a write produced: the object to answer with, its HTTP code, warnings."""

    obj: dict[str, Any]
    code: int = 200
    warnings: list[str] = field(default_factory=list)


Hook = Callable[[str, dict[str, Any]], None]


class ObjectApi:
    """kube-apiserver's object semantics on top of a :class:`Store`."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        for crd in list(store.list(CRD_KEY)):
            registry.register_crd(crd)

    # -- reads ---------------------------------------------------------------------

    def get(self, info: ResourceInfo, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(info.storage_key, namespace, name)
        if obj is None:
            raise errors.not_found(info.plural, info.group, name)
        return self.as_version(info, obj)

    def list(
        self,
        info: ResourceInfo,
        namespace: str | None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        limit: int = 0,
        continue_token: str = "",
    ) -> dict[str, Any]:
        list_rv = self.store.rv
        start = ""
        if continue_token:
            try:
                decoded = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                list_rv, start = int(decoded["rv"]), str(decoded["start"])
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.bad_request(f"continue key is not valid: {exc}") from exc
        everything = (labels is None or labels.empty) and (fields is None or fields.empty)
        matched = [obj for obj in self.store.list(info.storage_key, namespace)
                   if everything or _selected(obj, labels, fields)]
        if start:
            matched = [obj for obj in matched if _sort_key(obj) > start]
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if limit and len(matched) > limit:
            remaining = len(matched) - limit
            matched = matched[:limit]
            token = {"rv": list_rv, "start": _sort_key(matched[-1])}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            meta["remainingItemCount"] = remaining
        items = [self.as_version(info, obj, share=True) for obj in matched]
        return {"kind": info.list_kind, "apiVersion": info.group_version, "metadata": meta, "items": items}

    def as_version(self, info: ResourceInfo, obj: dict[str, Any], share: bool = False) -> dict[str, Any]:
        """The stored object as seen through ``info``'s group/version."""
        if obj.get("apiVersion") == info.group_version:
            return obj
        converted = dict(obj) if share else obj
        converted["apiVersion"] = info.group_version
        return converted

    # -- create --------------------------------------------------------------------

    def create(
        self,
        info: ResourceInfo,
        namespace: str,
        body: dict[str, Any],
        opts: WriteOptions,
        *,
        applied: bool = False,
    ) -> Outcome:
        obj = self._checked_body(info, namespace, body)
        managed = obj["metadata"].get("managedFields") if applied else None
        meta = obj["metadata"]
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise errors.invalid(info.kind, info.group, "", [{
                    "reason": "FieldValueRequired", "field": "metadata.name",
                    "message": "Required value: name or generateName is required"}])
            meta["name"] = self._generated_name(info, namespace, str(prefix))
        name = str(meta["name"])
        self._check_name(info, name)
        if info.namespaced:
            self._check_namespace_open(info, namespace, name)
        if self.store.peek(info.storage_key, namespace, name) is not None:
            raise errors.already_exists(info.plural, info.group, name)
        for key in SERVER_MANAGED_META:
            meta.pop(key, None)
        if "status" in info.subresources and info.custom:
            obj.pop("status", None)
        warnings = self._prepare(info, obj, opts)
        meta = obj["metadata"]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if info.has_generation:
            meta["generation"] = 1
        self._on_create(info, obj)
        if applied:
            obj["metadata"]["managedFields"] = managed
        else:
            obj = applying.record_update(None, obj, kind=info.kind, manager=opts.manager(),
                                         api_version=info.group_version, now=now_rfc3339())
        if not opts.dry_run:
            self.store.write(info.storage_key, obj, None)
            self._after_write(info, obj)
        return Outcome(copy.deepcopy(obj), 201, warnings)

    def _generated_name(self, info: ResourceInfo, namespace: str, prefix: str) -> str:
        for _ in range(20):
            candidate = prefix + "".join(random.choices(NAME_SUFFIX_ALPHABET, k=5))
            if self.store.peek(info.storage_key, namespace, candidate) is None:
                return candidate
        raise errors.ApiError(500, "AlreadyExists", f"could not generate a unique name from {prefix!r}")

    def _check_name(self, info: ResourceInfo, name: str) -> None:
        problem = ""
        if len(name) > 253:
            problem = "must be no more than 253 characters"
        elif not DNS_SUBDOMAIN.match(name) and info.plural not in ("rolebindings", "roles", "clusterroles",
                                                                      "clusterrolebindings"):
            problem = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                       "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
                       "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
        if problem:
            raise errors.invalid(info.kind, info.group, name, [{
                "reason": "FieldValueInvalid", "field": "metadata.name",
                "message": f'Invalid value: "{name}": {problem}'}])

    def _check_namespace_open(self, info: ResourceInfo, namespace: str, name: str) -> None:
        ns = self.store.peek(NAMESPACE_KEY, "", namespace)
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(info.plural, info.group, name,
                                   f"unable to create new content in namespace {namespace} "
                                   "because it is being terminated")

    # -- update --------------------------------------------------------------------

    def update(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        body: dict[str, Any],
        opts: WriteOptions,
        subresource: str = "",
    ) -> Outcome:
        obj = self._checked_body(info, namespace, body)
        if obj["metadata"].get("name", name) != name:
            raise errors.bad_request("the name of the object "
                                     f"({obj['metadata'].get('name')}) does not match the name on the URL ({name})")
        obj["metadata"]["name"] = name
        existing = self.store.get(info.storage_key, namespace, name)
        if existing is None:
            raise errors.not_found(info.plural, info.group, name)
        wanted_rv = obj["metadata"].get("resourceVersion")
        if wanted_rv and str(wanted_rv) != existing["metadata"]["resourceVersion"]:
            raise errors.conflict(info.plural, info.group, name)
        return self._replace(info, existing, obj, opts, subresource, applied=False)

    def _replace(
        self,
        info: ResourceInfo,
        existing: dict[str, Any],
        obj: dict[str, Any],
        opts: WriteOptions,
        subresource: str,
        *,
        applied: bool,
    ) -> Outcome:
        """Common tail of PUT and PATCH: merge with the stored object's server fields and store."""
        name = str(existing["metadata"]["name"])
        if subresource == "status":
            new = copy.deepcopy(existing)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            if "managedFields" in obj["metadata"]:
                new["metadata"]["managedFields"] = obj["metadata"]["managedFields"]
        elif subresource in ("", "finalize", "scale"):
            new = obj
            if "status" in info.subresources and subresource != "finalize":
                if "status" in existing:
                    new["status"] = existing["status"]
                else:
                    new.pop("status", None)
            if subresource == "finalize":
                new = copy.deepcopy(existing)
                new["spec"] = obj.get("spec", {})
        else:
            raise errors.not_found(info.plural, info.group, name)
        meta = new["metadata"]
        old_meta = existing["metadata"]
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if old_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
            if added:
                raise errors.invalid(info.kind, info.group, name, [{
                    "reason": "FieldValueForbidden", "field": "metadata.finalizers",
                    "message": "Forbidden: no new finalizers can be added if the object is being deleted, "
                               f"found new finalizers {sorted(added)!r}"}])
        warnings = self._prepare(info, new, opts)
        meta = new["metadata"]
        meta["generation"] = existing["metadata"].get("generation")
        if meta["generation"] is None:
            meta.pop("generation")
        elif _spec_changed(info, existing, new):
            meta["generation"] = int(meta["generation"]) + 1
        self._on_update(info, existing, new)
        if not applied:
            new = applying.record_update(existing, new, kind=info.kind, manager=opts.manager(),
                                         api_version=info.group_version, now=now_rfc3339(),
                                         subresource=subresource or None)
        meta = new["metadata"]
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if _same_content(existing, new):
            return Outcome(existing, 200, warnings)
        if opts.dry_run:
            return Outcome(new, 200, warnings)
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not (
            info.storage_key == NAMESPACE_KEY and (new.get("spec") or {}).get("finalizers")
        ):
            self.store.remove(info.storage_key, new)
            self._after_delete(info, new)
            return Outcome(copy.deepcopy(new), 200, warnings)
        self.store.write(info.storage_key, new, existing)
        self._after_write(info, new)
        return Outcome(copy.deepcopy(new), 200, warnings)

    # -- patch ---------------------------------------------------------------------

    def patch(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        content_type: str,
        patch: Any,
        opts: WriteOptions,
        subresource: str = "",
    ) -> Outcome:
        if content_type == PATCH_STRATEGIC and info.custom:
            raise errors.unsupported_media_type(content_type, [PATCH_JSON, PATCH_MERGE, PATCH_APPLY])
        existing = self.store.get(info.storage_key, namespace, name)
        if content_type == PATCH_APPLY:
            return self._apply(info, namespace, name, existing, patch, opts, subresource)
        if existing is None:
            raise errors.not_found(info.plural, info.group, name)
        current = self.as_version(info, copy.deepcopy(existing))
        try:
            if content_type == PATCH_JSON:
                patched = patching.json_patch(current, patch)
            elif content_type == PATCH_MERGE:
                if not isinstance(patch, dict):
                    raise errors.bad_request("a merge patch must be a JSON object")
                patched = patching.merge_patch(current, patch)
            else:
                if not isinstance(patch, dict):
                    raise errors.bad_request("a strategic merge patch must be a JSON object")
                patched = patching.strategic_merge_patch(current, patch, info.kind)
        except patching.PatchTestFailed as exc:
            raise errors.invalid(info.kind, info.group, name, [{
                "reason": "FieldValueInvalid", "field": "", "message": str(exc)}]) from exc
        except patching.PatchError as exc:
            raise errors.ApiError(422, "Invalid", f"the server rejected our request due to an error in our "
                                  f"request: {exc}") from exc
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and str(wanted_rv) != existing["metadata"]["resourceVersion"]:
            raise errors.conflict(info.plural, info.group, name)
        obj = self._checked_body(info, namespace, patched)
        return self._replace(info, existing, obj, opts, subresource, applied=False)

    def _apply(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        existing: dict[str, Any] | None,
        patch: Any,
        opts: WriteOptions,
        subresource: str,
    ) -> Outcome:
        if not opts.field_manager:
            raise errors.bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: "
                                     "is required for apply patch")
        if not isinstance(patch, dict):
            raise errors.bad_request("an apply patch must be an object")
        applied = self._checked_body(info, namespace, patch)
        if applied["metadata"].get("name", name) != name:
            raise errors.bad_request("the name of the object does not match the name on the URL")
        applied["metadata"]["name"] = name
        if "status" in info.subresources and subresource != "status":
            applied.pop("status", None)
        try:
            result = applying.apply(
                self.as_version(info, existing) if existing is not None else None,
                applied, kind=info.kind, manager=opts.field_manager, force=opts.force,
                api_version=info.group_version, now=now_rfc3339(), subresource=subresource or None)
        except applying.ApplyConflict as exc:
            raise errors.ApiError(409, "Conflict", exc.message(),
                                  {"name": name, "group": info.group, "kind": info.plural,
                                   "causes": exc.causes()}) from exc
        if existing is None:
            return self.create(info, namespace, result, opts, applied=True)
        wanted_rv = applied["metadata"].get("resourceVersion")
        if wanted_rv and str(wanted_rv) != existing["metadata"]["resourceVersion"]:
            raise errors.conflict(info.plural, info.group, name)
        return self._replace(info, existing, result, opts, subresource, applied=True)

    # -- delete --------------------------------------------------------------------

    def delete(self, info: ResourceInfo, namespace: str, name: str, opts: WriteOptions) -> Outcome:
        existing = self.store.get(info.storage_key, namespace, name)
        if existing is None:
            raise errors.not_found(info.plural, info.group, name)
        meta = existing["metadata"]
        pre = opts.preconditions
        if (pre.get("uid") and pre["uid"] != meta.get("uid")) or (
            pre.get("resourceVersion") and str(pre["resourceVersion"]) != meta.get("resourceVersion")
        ):
            raise errors.conflict(info.plural, info.group, name)
        new = copy.deepcopy(existing)
        finalizers = list(new["metadata"].get("finalizers") or [])
        policy = opts.propagation_policy
        if info.storage_key == NAMESPACE_KEY:
            new.setdefault("status", {})["phase"] = "Terminating"
            finalizers = finalizers or []
            new.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if finalizers or info.storage_key == NAMESPACE_KEY:
            if finalizers:
                new["metadata"]["finalizers"] = finalizers
            if not new["metadata"].get("deletionTimestamp"):
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                if info.custom and "generation" in new["metadata"]:
                    new["metadata"]["generation"] = int(new["metadata"]["generation"]) + 1
            if _same_content(existing, new) or opts.dry_run:
                return Outcome(self.as_version(info, new), 200)
            self.store.write(info.storage_key, new, existing)
            self._after_write(info, new)
            return Outcome(self.as_version(info, copy.deepcopy(new)), 200)
        if not opts.dry_run:
            self.store.remove(info.storage_key, existing)
            self._after_delete(info, existing)
        if info.custom:
            return Outcome(self.as_version(info, existing), 200)
        return Outcome({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": info.group, "kind": info.plural, "uid": meta.get("uid")},
        }, 200)

    def delete_collection(
        self,
        info: ResourceInfo,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        opts: WriteOptions,
    ) -> dict[str, Any]:
        listed = self.list(info, namespace, labels, fields)
        items = []
        for obj in listed["items"]:
            meta = obj["metadata"]
            items.append(self.delete(info, str(meta.get("namespace", "")), str(meta["name"]), opts).obj)
        return {"kind": info.list_kind, "apiVersion": info.group_version,
                "metadata": {"resourceVersion": str(self.store.rv)}, "items": items}

    def remove_now(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        """Delete regardless of finalizers (CRD and namespace cleanup)."""
        meta = obj["metadata"]
        current = self.store.get(info.storage_key, str(meta.get("namespace", "")), str(meta["name"]))
        if current is not None:
            self.store.remove(info.storage_key, current)
            self._after_delete(info, current)

    # -- shared steps --------------------------------------------------------------

    def _checked_body(self, info: ResourceInfo, namespace: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request(f"{info.kind} in version \"{info.version}\" cannot be handled as a "
                                     f"{info.kind}: the body must be a JSON object")
        obj = copy.deepcopy(body)
        api_version = obj.get("apiVersion")
        if api_version and api_version != info.group_version:
            raise errors.bad_request(f"the API version in the data ({api_version}) does not match the "
                                     f"expected API version ({info.group_version})")
        kind = obj.get("kind")
        if kind and kind != info.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind "
                                     f"({info.kind})")
        obj["apiVersion"] = info.group_version
        obj["kind"] = info.kind
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request(f"{info.kind} in version \"{info.version}\" cannot be handled as a "
                                     f"{info.kind}: metadata must be an object")
        if info.namespaced:
            given = meta.get("namespace")
            if given and given != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace "
                                         "sent on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        for key in ("labels", "annotations"):
            value = meta.get(key)
            if value is not None and (not isinstance(value, dict)
                                      or not all(isinstance(v, str) for v in value.values())):
                raise errors.bad_request(f"{info.kind} in version \"{info.version}\" cannot be handled as a "
                                         f"{info.kind}: metadata.{key} must map strings to strings")
        return obj

    def _prepare(self, info: ResourceInfo, obj: dict[str, Any], opts: WriteOptions) -> builtins.list[str]:
        """Schema pruning/defaulting/validation or built-in defaulting; returns warnings."""
        warnings: list[str] = []
        if info.custom and info.schema is not None:
            unknown = schema.unknown_fields(obj, info.schema)
            if unknown and opts.field_validation == "Strict":
                raise errors.bad_request(
                    f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
                    + "strict decoding error: "
                    + ", ".join(f'unknown field "{path}"' for path in unknown))
            if unknown and opts.field_validation == "Warn":
                warnings.extend(f'unknown field "{path}"' for path in unknown)
            prepared, causes = schema.prepare(obj, info.schema)
            if causes:
                raise errors.invalid(info.kind, info.group, str(obj["metadata"].get("name", "")), causes)
            obj.clear()
            obj.update(prepared)
        elif not info.custom:
            defaulted = defaulting.default_builtin(obj)
            obj.clear()
            obj.update(defaulted)
            if info.kind == "CustomResourceDefinition":
                _validate_crd(obj)
        return warnings

    def _on_create(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        if info.storage_key == CRD_KEY:
            _crd_status(obj)
        elif info.storage_key == NAMESPACE_KEY:
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        elif info.storage_key == "/services":
            spec = obj.setdefault("spec", {})
            if spec.get("type", "ClusterIP") != "ExternalName" and not spec.get("clusterIP"):
                used = {str(s.get("spec", {}).get("clusterIP")) for s in self.store.list("/services")}
                spec["clusterIP"] = defaulting.allocate_cluster_ip(used)
                spec["clusterIPs"] = [spec["clusterIP"]]
            obj.setdefault("status", {"loadBalancer": {}})

    def _on_update(self, info: ResourceInfo, old: dict[str, Any], new: dict[str, Any]) -> None:
        if info.storage_key == CRD_KEY:
            _crd_status(new)
        elif info.storage_key == "/services":
            spec = new.setdefault("spec", {})
            old_spec = old.get("spec", {})
            if not spec.get("clusterIP") and old_spec.get("clusterIP"):
                spec["clusterIP"] = old_spec["clusterIP"]
                spec["clusterIPs"] = old_spec.get("clusterIPs", [old_spec["clusterIP"]])

    def _after_write(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        if info.storage_key == CRD_KEY:
            self.registry.register_crd(obj)

    def _after_delete(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        if info.storage_key != CRD_KEY:
            return
        name = str(obj["metadata"]["name"])
        for crinfo in _unique_keys(self.registry, obj):
            for cr in list(self.store.list(crinfo.storage_key)):
                self.store.remove(crinfo.storage_key, copy.deepcopy(cr))
        self.registry.unregister_crd(name)


def _unique_keys(registry: Registry, crd: dict[str, Any]) -> list[ResourceInfo]:
    spec = crd.get("spec") or {}
    seen: dict[str, ResourceInfo] = {}
    for info in registry.all():
        if info.custom and info.group == spec.get("group") and info.plural == (spec.get("names") or {}).get(
            "plural"
        ):
            seen.setdefault(info.storage_key, info)
    return list(seen.values())


def _sort_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _selected(obj: dict[str, Any], labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    if labels is not None and not labels.matches(obj["metadata"].get("labels") or {}):
        return False
    return fields is None or fields.matches(obj)


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    trimmed = {key: value for key, value in obj.items() if key != "metadata"}
    meta = {key: value for key, value in obj["metadata"].items() if key not in ("resourceVersion", "managedFields")}
    trimmed["metadata"] = meta
    return trimmed


def _same_content(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """A no-op write: nothing but managedFields timestamps would change."""
    if _content(old) != _content(new):
        return False
    return _managed_sans_time(old) == _managed_sans_time(new)


def _managed_sans_time(obj: dict[str, Any]) -> list[Any]:
    return [{k: v for k, v in entry.items() if k != "time"} for entry in obj["metadata"].get("managedFields") or []]


def _spec_changed(info: ResourceInfo, old: dict[str, Any], new: dict[str, Any]) -> bool:
    skip = {"metadata", "apiVersion", "kind"}
    if "status" in info.subresources or not info.custom:
        skip.add("status")
    old_rest = {k: v for k, v in old.items() if k not in skip}
    new_rest = {k: v for k, v in new.items() if k not in skip}
    return old_rest != new_rest


def _validate_crd(crd: dict[str, Any]) -> None:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    name = str(crd["metadata"].get("name", ""))
    causes = []
    for key in ("plural", "kind"):
        if not names.get(key):
            causes.append({"reason": "FieldValueRequired", "field": f"spec.names.{key}", "message": "Required value"})
    if not spec.get("group"):
        causes.append({"reason": "FieldValueRequired", "field": "spec.group", "message": "Required value"})
    if not spec.get("versions"):
        causes.append({"reason": "FieldValueRequired", "field": "spec.versions", "message": "Required value"})
    elif sum(1 for v in spec["versions"] if v.get("storage")) != 1:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.versions",
                       "message": "Invalid value: must have exactly one version marked as storage version"})
    if names.get("plural") and spec.get("group") and name != f"{names['plural']}.{spec['group']}":
        causes.append({"reason": "FieldValueInvalid", "field": "metadata.name",
                       "message": f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'})
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append({"reason": "FieldValueNotSupported", "field": "spec.scope",
                       "message": f'Unsupported value: "{spec.get("scope")}": supported values: '
                                  '"Cluster", "Namespaced"'})
    if causes:
        raise errors.invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, causes)


def _crd_status(crd: dict[str, Any]) -> None:
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    status = crd.setdefault("status", {})
    now = now_rfc3339()
    previous = {c.get("type"): c for c in status.get("conditions") or []}
    status["conditions"] = [
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
         "message": "no conflicts found",
         "lastTransitionTime": previous.get("NamesAccepted", {}).get("lastTransitionTime", now)},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted",
         "lastTransitionTime": previous.get("Established", {}).get("lastTransitionTime", now)},
    ]
    status["acceptedNames"] = names
    stored = list(status.get("storedVersions") or [])
    version = storage_version(crd)
    if version and version not in stored:
        stored.append(version)
    status["storedVersions"] = stored


def random_token() -> str:
    return "".join(random.SystemRandom().choices(string.ascii_letters + string.digits, k=40))


def iter_all(store: Store, registry: Registry) -> Iterable[tuple[ResourceInfo, dict[str, Any]]]:
    """Every stored object with one resource that serves it (controllers use this)."""
    seen: set[str] = set()
    for info in registry.all():
        if info.storage_key in seen:
            continue
        seen.add(info.storage_key)
        for obj in list(store.list(info.storage_key)):
            yield info, obj
