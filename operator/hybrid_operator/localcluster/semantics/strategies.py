"""Per-kind rules: what kube-apiserver's registry strategies add to the generic verbs.

Custom resources go through their CRD version's structural schema: unknown
fields are reported (``fieldValidation=Warn``), rejected (``Strict``) or
silently dropped (``Ignore``), then the object is pruned, defaulted and
validated.  Built-in kinds get kube-apiserver's defaults.  A few kinds need
more on create or update: Namespaces get the ``kubernetes`` finalizer, phase
Active and their name label; Services get a cluster IP and node ports
(:mod:`.serviceips`), kept across updates; CustomResourceDefinitions are validated and get their status (see
:mod:`.crds`).
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import errors, objects
from hybrid_operator.localcluster.resources import CRDS_KEY, NAMESPACES_KEY, SERVICES_KEY, ResourceInfo
from hybrid_operator.localcluster.semantics import celrules, crds, defaulting, schema, serviceips
from hybrid_operator.localcluster.semantics.writes import WriteOptions
from hybrid_operator.localcluster.storage.store import Store


def prepare(info: ResourceInfo, obj: dict[str, Any], opts: WriteOptions,
            old: dict[str, Any] | None = None) -> list[str]:
    """Schema pruning/defaulting/validation (and CEL rules, ``old`` for transition rules) or built-in
    defaulting, in place; returns warnings."""
    if info.custom and info.schema is not None:
        return _prepare_custom(info, info.schema, obj, opts, old)
    if not info.custom:
        _replace_content(obj, defaulting.default_builtin(obj))
        if info.kind == crds.KIND:
            crds.validate(obj)
    return []


def _prepare_custom(info: ResourceInfo, structural: dict[str, Any], obj: dict[str, Any],
                    opts: WriteOptions, old: dict[str, Any] | None) -> list[str]:
    warnings: list[str] = []
    unknown = schema.unknown_fields(obj, structural)
    if unknown and opts.field_validation == "Strict":
        raise errors.bad_request(
            f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
            + "strict decoding error: "
            + ", ".join(f'unknown field "{path}"' for path in unknown))
    if unknown and opts.field_validation == "Warn":
        warnings.extend(f'unknown field "{path}"' for path in unknown)
    prepared, causes = schema.prepare(obj, structural)
    if not causes and celrules.has_rules(structural):
        causes = celrules.validate(structural, prepared, old)
    if causes:
        raise errors.invalid(info.kind, info.group, objects.name(obj), causes)
    _replace_content(obj, prepared)
    return warnings


def _replace_content(obj: dict[str, Any], new: dict[str, Any]) -> None:
    obj.clear()
    obj.update(new)


def prepare_for_create(store: Store, info: ResourceInfo, obj: dict[str, Any]) -> None:
    if info.storage_key == CRDS_KEY:
        crds.set_status(obj)
    elif info.storage_key == NAMESPACES_KEY:
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif info.storage_key == SERVICES_KEY:
        serviceips.allocate_on_create(store.list(SERVICES_KEY), obj)
        obj.setdefault("status", {"loadBalancer": {}})


def prepare_for_update(store: Store, info: ResourceInfo, old: dict[str, Any], new: dict[str, Any]) -> None:
    if info.storage_key == CRDS_KEY:
        crds.set_status(new)
    elif info.storage_key == SERVICES_KEY:
        serviceips.keep_on_update(store.list(SERVICES_KEY), old, new)
