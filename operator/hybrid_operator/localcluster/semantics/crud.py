"""The object API: create, read, update, patch and delete, as kube-apiserver's generic registry does them.

:class:`ObjectApi` is what the HTTP handlers and the controllers call.  It
runs each verb's steps in kube-apiserver's order on top of the
:class:`~hybrid_operator.localcluster.storage.store.Store`, and takes the
rules for each step from the module that owns them: :mod:`.metadata` (names,
server-set fields, preconditions), :mod:`.strategies` (per-kind defaulting,
schemas, Namespace/Service/CRD specifics), :mod:`.generation` (no-op writes,
generation bumps), :mod:`.deletion` (finalizers and graceful deletion),
:mod:`.listing` (selectors and paging), :mod:`.patching` and :mod:`.applying`
(the patch formats, server-side apply) and :mod:`.managedfields` (who owns
which field).  It also keeps the resource registry in step with the stored
CustomResourceDefinitions.
"""

from __future__ import annotations

import builtins
import copy
import json
from typing import Any

from hybrid_operator.localcluster import clock, errors, objects
from hybrid_operator.localcluster.resources import CRDS_KEY, NAMESPACES_KEY, Registry, ResourceInfo
from hybrid_operator.localcluster.semantics import (
    applying,
    builtinschemas,
    builtinvalidation,
    conversion,
    crds,
    deletion,
    generation,
    immutability,
    listing,
    managedfields,
    metadata,
    metavalidation,
    patching,
    schema,
    shardselectors,
    strategies,
    typed,
)
from hybrid_operator.localcluster.semantics.fieldselectors import FieldSelector
from hybrid_operator.localcluster.semantics.labelselectors import LabelSelector
from hybrid_operator.localcluster.semantics.shardselectors import ShardSelector
from hybrid_operator.localcluster.semantics.writes import (
    PATCH_APPLY,
    PATCH_JSON,
    PATCH_MERGE,
    PATCH_STRATEGIC,
    Outcome,
    WriteOptions,
)
from hybrid_operator.localcluster.storage.store import Store


class ObjectApi:
    """kube-apiserver's object semantics on top of a :class:`Store`."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        # Per custom resource storage key: the resourceVersion of its CRD's last write. Objects written
        # after it were pruned against the current schema already; older ones are pruned when read.
        self._schema_rv: dict[str, int] = {}
        for crd in list(store.list(CRDS_KEY)):
            registry.register_crd(crd)
            self._note_schema(crd)

    # -- reads ---------------------------------------------------------------------

    def get(self, info: ResourceInfo, namespace: str, name: str) -> dict[str, Any]:
        return self.as_version(info, self._stored(info, namespace, name))

    def list(
        self,
        info: ResourceInfo,
        namespace: str | None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        limit: int = 0,
        continue_token: str = "",
        shard: ShardSelector | None = None,
    ) -> dict[str, Any]:
        list_rv, after = listing.decode_continue(continue_token) if continue_token else (self.store.rv, "")
        items, meta = listing.select_page(self.store.list(info.storage_key, namespace), labels, fields, after,
                                          shard, limit, list_rv)
        if shard is not None and shardselectors.echoed(info.custom):
            meta["shardInfo"] = shard.info()
        if info.custom:
            meta.setdefault("continue", "")  # an unstructured list always has it, empty on the last page
        return {"kind": info.list_kind, "apiVersion": info.group_version, "metadata": meta,
                "items": [self.as_version(info, obj, share=True) for obj in items]}

    def as_version(self, info: ResourceInfo, obj: dict[str, Any], share: bool = False) -> dict[str, Any]:
        """The stored object as seen through ``info``'s group/version (and its current schema)."""
        obj = self._pruned(info, obj)
        if obj.get("apiVersion") == info.group_version:
            return obj
        if conversion.converts(info):
            return conversion.to_version(info, obj)
        converted = dict(obj) if share else obj
        converted["apiVersion"] = info.group_version
        return converted

    def _stored(self, info: ResourceInfo, namespace: str, name: str) -> dict[str, Any]:
        """A private copy of the stored object, or 404."""
        obj = self.store.get(info.storage_key, namespace, name)
        if obj is None:
            raise errors.not_found(info.plural, info.group, name)
        return self._pruned(info, obj)

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
        """POST; ``applied`` when server-side apply made ``body`` (its managedFields are kept as they are)."""
        obj, decode_warnings = _decoded(info, namespace, body, opts, required=True)
        obj = conversion.to_storage(info, obj)
        managed = obj["metadata"].get("managedFields") if applied else None
        name = metadata.name_for_create(
            info, obj["metadata"], lambda taken: self.store.peek(info.storage_key, namespace, taken) is not None)
        metadata.check_name(info, name)
        if info.namespaced:
            self._check_namespace_open(info, namespace, name)
        if self.store.peek(info.storage_key, namespace, name) is not None:
            raise errors.already_exists(info.plural, info.group, name)
        metadata.drop_server_fields(obj)
        if "status" in info.subresources and info.custom:
            obj.pop("status", None)
        warnings = decode_warnings + strategies.prepare(info, obj, opts)
        _validate_meta(info, obj)
        _validate_builtin(info, obj)
        metadata.stamp_created(info, obj)
        strategies.prepare_for_create(self.store, info, obj)
        if applied:
            obj["metadata"]["managedFields"] = managed
        else:
            obj = managedfields.record_update(None, obj, kind=info.kind, manager=opts.manager(),
                                         api_version=info.group_version, now=clock.now_rfc3339())
        if not opts.dry_run:
            self._write(info, obj, None)
        return Outcome(self.as_version(info, copy.deepcopy(obj)), 201, warnings)

    def _check_namespace_open(self, info: ResourceInfo, namespace: str, name: str) -> None:
        """New objects need an existing namespace that is not terminating (the NamespaceLifecycle admission)."""
        ns = self.store.peek(NAMESPACES_KEY, "", namespace)
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if objects.deleting(ns):
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
        """PUT of the object or of one of its subresources."""
        obj, decode_warnings = _decoded(info, namespace, body, opts, required=not subresource)
        metadata.check_name_matches(obj, name)
        obj["metadata"]["name"] = name
        existing = self._stored(info, namespace, name)
        metadata.check_uid_precondition(info, existing, obj)
        metadata.check_resource_version(info, existing, obj["metadata"].get("resourceVersion"))
        return self._replace(info, existing, obj, opts, subresource, applied=False, warnings=decode_warnings)

    def _replace(
        self,
        info: ResourceInfo,
        existing: dict[str, Any],
        obj: dict[str, Any],
        opts: WriteOptions,
        subresource: str,
        *,
        applied: bool,
        warnings: builtins.list[str] | None = None,
    ) -> Outcome:
        """Common tail of PUT and PATCH: merge with the stored object's server fields and store."""
        new = _written(info, existing, conversion.to_storage(info, obj), subresource)
        metadata.keep_server_fields(existing, new)
        metadata.check_no_new_finalizers(info, existing, new)
        warnings = (warnings or []) + strategies.prepare(info, new, opts, old=existing)
        _validate_meta(info, new)
        if subresource in ("", "scale"):
            _validate_builtin(info, new)
        if not info.custom and subresource in ("", "scale"):
            changed = immutability.update_causes(info.group, info.kind, existing, new)
            if changed:
                raise errors.invalid(info.kind, info.group, objects.name(existing), changed)
        generation.carry_generation(info, existing, new)
        strategies.prepare_for_update(self.store, info, existing, new)
        if not applied:
            new = managedfields.record_update(existing, new, kind=info.kind, manager=opts.manager(),
                                         api_version=info.group_version, now=clock.now_rfc3339(),
                                         subresource=subresource or None)
        new["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        if generation.same_content(existing, new):
            return Outcome(self.as_version(info, existing), 200, warnings)
        if opts.dry_run:
            return Outcome(self.as_version(info, new), 200, warnings)
        if deletion.finished(info, new):
            self._remove(info, new)
        else:
            self._write(info, new, existing)
        return Outcome(self.as_version(info, copy.deepcopy(new)), 200, warnings)

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
        """PATCH in one of the four patch formats (``content_type``)."""
        if content_type == PATCH_STRATEGIC and info.custom:
            raise errors.unsupported_media_type(content_type, [PATCH_JSON, PATCH_MERGE, PATCH_APPLY])
        existing = self.store.get(info.storage_key, namespace, name)
        if existing is not None:
            existing = self._pruned(info, existing)
        if content_type == PATCH_APPLY:
            return self._apply(info, namespace, name, existing, patch, opts, subresource)
        if existing is None:
            raise errors.not_found(info.plural, info.group, name)
        patched = _patched(info, name, self.as_version(info, copy.deepcopy(existing)), content_type, patch)
        obj, decode_warnings = _decoded_patch(info, namespace, patched, opts, required=not subresource)
        metadata.check_name_matches(obj, name, required=True)
        metadata.check_resource_version(info, existing, obj["metadata"].get("resourceVersion"))
        metadata.check_uid_unchanged(info, existing, obj)
        return self._replace(info, existing, obj, opts, subresource, applied=False, warnings=decode_warnings)

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
        """Server-side apply: creates the object when there is none."""
        if not opts.field_manager:
            raise errors.bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: "
                                     "is required for apply patch")
        if not isinstance(patch, dict):
            raise errors.bad_request("an apply patch must be an object")
        applied, decode_warnings = _decoded(info, namespace, patch, opts, required=False)
        metadata.check_name_matches(applied, name)
        applied["metadata"]["name"] = name
        if "status" in info.subresources and subresource != "status":
            applied.pop("status", None)
        try:
            result = applying.apply(
                self.as_version(info, existing) if existing is not None else None,
                applied, kind=info.kind, manager=opts.field_manager, force=opts.force,
                api_version=info.group_version, now=clock.now_rfc3339(), subresource=subresource or None)
        except applying.ApplyConflict as exc:
            raise exc.api_error(info.plural, info.group, name) from exc
        if existing is None:
            return self.create(info, namespace, result, opts, applied=True)
        metadata.check_resource_version(info, existing, applied["metadata"].get("resourceVersion"))
        metadata.check_uid_unchanged(info, existing, applied)
        return self._replace(info, existing, result, opts, subresource, applied=True, warnings=decode_warnings)

    # -- delete --------------------------------------------------------------------

    def delete(self, info: ResourceInfo, namespace: str, name: str, opts: WriteOptions) -> Outcome:
        """DELETE: remove the object, or mark it when finalizers have to run first."""
        existing = self._stored(info, namespace, name)
        deletion.check_preconditions(info, existing, opts.preconditions)
        marked = deletion.marked(info, existing, opts.propagation_policy)
        if marked is not None:
            if generation.same_content(existing, marked) or opts.dry_run:
                return Outcome(self.as_version(info, marked), 200)
            self._write(info, marked, existing)
            return Outcome(self.as_version(info, copy.deepcopy(marked)), 200)
        if not opts.dry_run:
            self._remove(info, existing)
        if info.custom:
            return Outcome(self.as_version(info, existing), 200)
        return Outcome(deletion.success_status(info, name, existing["metadata"].get("uid")), 200)

    def delete_collection(
        self,
        info: ResourceInfo,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        opts: WriteOptions,
        shard: ShardSelector | None = None,
    ) -> dict[str, Any]:
        """DELETECOLLECTION: delete every object the selectors (and the shard selector) pick; the answer is their
        list as it was read before (kube-apiserver's ``DeleteCollection`` returns that list, its metadata too)."""
        listed = self.list(info, namespace, labels, fields, shard=shard)
        for obj in listed["items"]:
            self.delete(info, objects.namespace(obj), objects.name(obj), opts)
        return listed

    def remove_now(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        """Delete regardless of finalizers (CRD and namespace cleanup)."""
        current = self.store.get(info.storage_key, objects.namespace(obj), objects.name(obj))
        if current is not None:
            self._remove(info, current)

    # -- storing -------------------------------------------------------------------

    def _write(self, info: ResourceInfo, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        self.store.write(info.storage_key, obj, old)
        if info.storage_key == CRDS_KEY:
            self.registry.register_crd(obj)
            self._note_schema(obj)

    def _note_schema(self, crd: dict[str, Any]) -> None:
        for served in crds.served(self.registry, crd):
            self._schema_rv[served.storage_key] = int(crd["metadata"].get("resourceVersion") or 0)

    def _pruned(self, info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
        """A custom resource as its CRD's *current* schema sees it: fields the schema no longer declares are
        gone (kube-apiserver prunes what it reads, so a schema change never breaks existing objects).

        Only objects stored before the CRD's last change can need it; the others, built-in objects and
        custom resources without a schema come back as they are (not copied).
        """
        if not info.custom or info.schema is None or info.schema.get(schema.PRESERVE_UNKNOWN) is True:
            return obj
        written = str(objects.meta(obj).get("resourceVersion") or "0")
        if written.isdigit() and int(written) > self._schema_rv.get(info.storage_key, 0):
            return obj
        pruned: dict[str, Any] = schema.prune(obj, info.schema)
        return pruned

    def _remove(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        """Remove ``obj``; a CustomResourceDefinition takes its custom resources and their routes along."""
        self.store.remove(info.storage_key, obj)
        if info.storage_key != CRDS_KEY:
            return
        for served in crds.served(self.registry, obj):
            for cr in list(self.store.list(served.storage_key)):
                self.store.remove(served.storage_key, copy.deepcopy(cr))
        self.registry.unregister_crd(str(obj["metadata"]["name"]))


def _decoded(info: ResourceInfo, namespace: str, body: Any, opts: WriteOptions, *,
             required: bool) -> tuple[dict[str, Any], list[str]]:
    """A POST, PUT or apply body decoded as into the kind's Go struct: 400 ``cannot be handled as`` otherwise.

    Returns the object (unknown fields of built-in kinds dropped) and the warnings for them
    (``fieldValidation=Warn``); ``required``: absent required fields are a 422.
    """
    try:
        obj = metadata.checked_body(info, namespace, body)
        return obj, _typed_fields(info, obj, opts, required=required)
    except typed.TypeMismatch as exc:
        raise errors.undecodable(info.kind, info.version, str(exc)) from None


MAX_SHOWN_PATCHED = 4096


def _decoded_patch(info: ResourceInfo, namespace: str, patched: dict[str, Any], opts: WriteOptions, *,
                   required: bool) -> tuple[dict[str, Any], list[str]]:
    """The object a patch produced, decoded as :func:`_decoded` does, but a failure is 422 on field ``patch``."""
    try:
        obj = metadata.checked_body(info, namespace, patched)
        return obj, _typed_fields(info, obj, opts, required=required)
    except typed.TypeMismatch as exc:
        shown = json.dumps(patched, separators=(",", ":"))
        if len(shown) > MAX_SHOWN_PATCHED:
            shown = shown[:MAX_SHOWN_PATCHED] + "..."
        raise errors.invalid("", "", "", [{"reason": "FieldValueInvalid", "field": "patch",
                                           "message": f"Invalid value: {json.dumps(shown)}: {exc}"}]) from None


def _typed_fields(info: ResourceInfo, obj: dict[str, Any], opts: WriteOptions, *, required: bool) -> list[str]:
    """Built-in kinds against their schema: types, unknown fields (per ``fieldValidation``), required fields."""
    if info.custom:
        return []
    report = builtinschemas.check(obj, info.group, info.version, info.kind)
    if report is None:
        return []
    unknown = [f'unknown field "{path}"' for path in report.unknown]
    if unknown and opts.field_validation == "Strict":
        raise typed.TypeMismatch("strict decoding error: " + ", ".join(unknown))
    if required and report.missing:
        raise errors.invalid(info.kind, info.group, objects.name(obj), [
            {"reason": "FieldValueRequired", "field": path, "message": "Required value"} for path in report.missing])
    return unknown if opts.field_validation == "Warn" else []


def _validate_builtin(info: ResourceInfo, obj: dict[str, Any]) -> None:
    """422 for what kube-apiserver's hand-written validation of the kind refuses (see :mod:`.builtinvalidation`)."""
    if not info.custom:
        causes = builtinvalidation.causes(info.group, info.kind, obj)
        if causes:
            raise errors.invalid(info.kind, info.group, objects.name(obj), causes)


def _validate_meta(info: ResourceInfo, obj: dict[str, Any]) -> None:
    """422 for labels and annotations apimachinery would refuse."""
    causes = metavalidation.object_meta_causes(obj["metadata"])
    if causes:
        raise errors.invalid(info.kind, info.group, objects.name(obj), causes)


def _written(info: ResourceInfo, existing: dict[str, Any], obj: dict[str, Any], subresource: str) -> dict[str, Any]:
    """The object a write to ``subresource`` stores: ``/status`` changes only status, the main resource
    (and ``/scale``) everything but status, ``/finalize`` only the spec."""
    if subresource == "status":
        new = copy.deepcopy(existing)
        if "status" in obj:
            new["status"] = obj["status"]
        else:
            new.pop("status", None)
        if "managedFields" in obj["metadata"]:
            new["metadata"]["managedFields"] = obj["metadata"]["managedFields"]
        return new
    if subresource == "finalize":
        new = copy.deepcopy(existing)
        new["spec"] = obj.get("spec", {})
        return new
    if subresource in ("", "scale"):
        if "status" in info.subresources:
            if "status" in existing:
                obj["status"] = existing["status"]
            else:
                obj.pop("status", None)
        return obj
    raise errors.not_found(info.plural, info.group, str(existing["metadata"]["name"]))


def _patched(info: ResourceInfo, name: str, current: dict[str, Any], content_type: str, patch: Any) -> dict[str, Any]:
    """``current`` after a JSON, merge or strategic merge patch."""
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
        raise errors.patch_rejected(str(exc)) from exc
    if not isinstance(patched, dict):
        raise errors.invalid("", "", "", [{"reason": "FieldValueInvalid", "field": "patch",
                                           "message": f"Invalid value: {json.dumps(json.dumps(patched))}: json: "
                                                      f"cannot unmarshal {typed.json_kind(patched)} into Go value "
                                                      f"of type {info.kind}"}])
    return patched
