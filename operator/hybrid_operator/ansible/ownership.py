"""Who owns what an Ansible run creates: the pure rules of the ownership proxy.

The Operator SDK's Ansible proxy marks every object a playbook creates as a
dependent of the custom resource being reconciled, so Kubernetes garbage
collects it with the CR and a change to it re-enqueues the CR.  This module
holds the decisions, free of any I/O:

* which API request is a write that (may) create an object (:func:`plan_write`);
* how to link the child to its owner (:func:`choose_link`): an
  ``ownerReference`` when Kubernetes allows one (the owner is cluster-scoped,
  or both live in the same namespace), otherwise the
  ``operator-sdk/primary-resource`` + ``operator-sdk/primary-resource-type``
  annotations (cross-namespace and cluster-scoped children of a namespaced CR);
* the reference itself, ``{apiVersion, kind, name, uid}`` with neither
  ``controller`` nor ``blockOwnerDeletion``, exactly as the SDK writes it;
* the rewriting of a JSON or YAML request body (:func:`inject_body`).

Writes that carry the link -- only where the object is being created, as the
SDK's proxy links only what a run creates, so a run never adopts someone else's
object (a finalizer's ``k8s force: yes`` on a ConfigMap another component made
would otherwise hand it to the garbage collector with the CR):

* ``POST`` to a collection (create), as in the SDK;
* ``PATCH`` with ``application/apply-patch+yaml`` (server-side apply) and
  ``PUT`` of a whole object (``kubernetes.core.k8s`` with ``apply: true`` or
  ``force: true``) when the object does not exist yet -- the SDK leaves these
  unlinked (AOP#33) -- or when it already carries this owner's link: an apply
  configuration that omits a field its manager applied before removes that
  field, and a replace without the reference drops it, so restating the link is
  what keeps the ownership the first write set (:func:`links_existing`).

Merge, strategic-merge and JSON patches never create an object and leave
``metadata.ownerReferences`` alone, so they pass through untouched (a playbook
may even detach an object with ``ownerReferences: null``), as do subresources,
protobuf/CBOR bodies and the owner itself.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from hybrid_operator.controller.dependents import PRIMARY_RESOURCE, PRIMARY_RESOURCE_TYPE
from hybrid_operator.kube import objects

Link = Literal["ownerReference", "annotations"]
Write = Literal["create", "apply", "replace"]

APPLY_PATCH = "application/apply-patch+yaml"
JSON_TYPES = frozenset({"application/json"})
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", APPLY_PATCH})
# The core-group paths /api/v1/namespaces/{name}/{sub} address a Namespace's own subresources.
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
# Events describe objects, they are not parts of them: an Event about a resource must outlive it
# (and a k8s_event posted by a finalizer would otherwise be garbage-collected with its resource).
UNOWNED_PLURALS = frozenset({"events"})
# A dependent must be readable and watchable; the SDK skips "virtual" kinds (reviews, bindings).
WATCHABLE_VERBS = frozenset({"get", "list", "watch"})


@dataclass(frozen=True)
class OwnerKey:
    """Identifies an owning custom resource across runs (its uid changes when it is re-created)."""

    api_version: str
    kind: str
    namespace: str
    name: str


@dataclass(frozen=True)
class Owner:
    """The custom resource a run reconciles, as far as ownership needs it."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str = ""

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Owner:
        """The owner described by a full object; ValueError when it lacks an identity field."""
        metadata = objects.meta(obj)
        fields = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                  "metadata.name": metadata.get("name"), "metadata.uid": metadata.get("uid")}
        missing = [key for key, value in fields.items() if not value]
        if missing:
            raise ValueError(f"owner object lacks {', '.join(missing)}")
        return cls(str(obj["apiVersion"]), str(obj["kind"]), str(metadata["name"]), str(metadata["uid"]),
                   str(metadata.get("namespace") or ""))

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def key(self) -> OwnerKey:
        return OwnerKey(self.api_version, self.kind, self.namespace, self.name)


@dataclass(frozen=True)
class Target:
    """What an API path addresses: a collection, an object, or an object's subresource."""

    group: str
    version: str
    plural: str
    namespace: str | None = None  # None: a cluster-level path
    name: str = ""
    subresource: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class ChildKind:
    """A kind of dependent an owner has, with how it is linked (what a dependent watch needs)."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    link: Link


@dataclass(frozen=True)
class ChildRef:
    """One dependent written through the proxy."""

    api_version: str
    group: str
    version: str
    kind: str
    plural: str
    namespace: str  # "" for a cluster-scoped child
    name: str
    link: Link

    @property
    def child_kind(self) -> ChildKind:
        return ChildKind(self.group, self.version, self.kind, self.plural, bool(self.namespace), self.link)


def parse_path(path: str) -> Target | None:
    """The resource an API path addresses, or None for non-resource paths (discovery, /version, legacy watch)."""
    segments = [segment for segment in path.split("/") if segment]
    if len(segments) >= 3 and segments[0] == "api":
        group, version, rest = "", segments[1], segments[2:]
    elif len(segments) >= 4 and segments[0] == "apis":
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return None
    if rest[0] == "watch":
        return None
    namespace: str | None = None
    namespace_own_subresource = group == "" and len(rest) == 3 and rest[2] in NAMESPACE_SUBRESOURCES
    if rest[0] == "namespaces" and len(rest) >= 3 and not namespace_own_subresource:
        namespace, rest = rest[1], rest[2:]
    return Target(group, version, rest[0], namespace, rest[1] if len(rest) > 1 else "", "/".join(rest[2:]))


def media_type(content_type: str | None) -> str:
    """The bare media type of a Content-Type header (parameters dropped); none means JSON, as for the apiserver.

    The kubernetes Python client sends POST and PUT bodies without any Content-Type.
    """
    return (content_type or "").split(";", 1)[0].strip().lower() or "application/json"


def plan_write(method: str, content_type: str | None, target: Target | None) -> Write | None:
    """Whether this request writes a whole object that should carry the owner link, and how."""
    if target is None or target.subresource or target.plural in UNOWNED_PLURALS:
        return None
    media = media_type(content_type)
    if media not in JSON_TYPES | YAML_TYPES:
        return None  # protobuf, CBOR, and the patch types that cannot create
    method = method.upper()
    if method == "POST" and not target.name and media != APPLY_PATCH:
        return "create"
    if method == "PATCH" and target.name and media == APPLY_PATCH:
        return "apply"
    if method == "PUT" and target.name and media != APPLY_PATCH:
        return "replace"
    return None


class _Marker:
    """What is known of the object a write addresses, when it is not the object itself."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: the object does not exist (the write creates it)
ABSENT = _Marker("ABSENT")
#: the API could not say (the write is left alone: never adopt on a guess)
UNKNOWN = _Marker("UNKNOWN")
Existing = dict[str, Any] | _Marker


def carries_link(obj: dict[str, Any], owner: Owner, link: Link) -> bool:
    """True when ``obj`` is already linked to ``owner`` (its ownerReference, or its primary annotations)."""
    metadata = objects.meta(obj)
    if link == "ownerReference":
        return any(isinstance(ref, dict) and ref.get("uid") == owner.uid
                   for ref in metadata.get("ownerReferences") or [])
    annotations = metadata.get("annotations") or {}
    return all(annotations.get(key) == value for key, value in owner_annotations(owner).items())


def links_existing(existing: Existing, owner: Owner, link: Link) -> bool:
    """Whether an apply or a replace of an object in the state ``existing`` carries the owner link:
    when it creates the object, or restates a link the object has; never onto someone else's object."""
    if existing is ABSENT:
        return True
    if isinstance(existing, dict):
        return carries_link(existing, owner, link)
    return False


def is_virtual(verbs: list[str] | frozenset[str] | set[str]) -> bool:
    """True for kinds that cannot be watched (TokenReview, Binding...): never dependents."""
    return not set(verbs) >= WATCHABLE_VERBS


def choose_link(owner: Owner, child_namespace: str | None) -> Link:
    """An ownerReference where Kubernetes allows one, else the primary-resource annotations."""
    if not owner.namespace or owner.namespace == child_namespace:
        return "ownerReference"
    return "annotations"


def owner_reference(owner: Owner) -> dict[str, str]:
    """The reference the SDK adds: no ``controller``, no ``blockOwnerDeletion``."""
    return {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name, "uid": owner.uid}


def owner_annotations(owner: Owner) -> dict[str, str]:
    """The annotations naming a namespaced owner (``<ns>/<name>``, ``<Kind>.<group>``)."""
    kind = f"{owner.kind}.{owner.group}" if owner.group else owner.kind
    return {PRIMARY_RESOURCE: f"{owner.namespace}/{owner.name}", PRIMARY_RESOURCE_TYPE: kind}


def is_owner(owner: Owner, target: Target, body: dict[str, Any]) -> bool:
    """True when the write addresses the owner itself (a playbook updating its own CR)."""
    name = target.name or objects.name(body)
    return (target.api_version == owner.api_version and body.get("kind", owner.kind) == owner.kind
            and (target.namespace or "") == owner.namespace and name == owner.name)


def link_object(body: dict[str, Any], owner: Owner, link: Link) -> dict[str, Any]:
    """A copy of an object-shaped body carrying the link to ``owner`` (idempotent)."""
    linked = dict(body)
    metadata = copy.deepcopy(objects.meta(body))
    linked["metadata"] = metadata
    if link == "ownerReference":
        references = list(metadata.get("ownerReferences") or [])
        if not any(isinstance(ref, dict) and ref.get("uid") == owner.uid for ref in references):
            references.append(owner_reference(owner))
        metadata["ownerReferences"] = references
    else:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **owner_annotations(owner)}
    return linked


def decode_body(content_type: str | None, data: bytes) -> dict[str, Any] | None:
    """The object in a JSON or YAML request body; None when it is not one (left for the server to reject)."""
    media = media_type(content_type)
    try:
        if media in JSON_TYPES:
            decoded = json.loads(data)
        elif media in YAML_TYPES:
            decoded = yaml.safe_load(data)
        else:
            return None
    except (ValueError, yaml.YAMLError):
        return None
    return decoded if isinstance(decoded, dict) else None


def inject_body(content_type: str | None, data: bytes, owner: Owner, link: Link) -> bytes | None:
    """The body rewritten to carry the link, as JSON (valid YAML too); None when it cannot be."""
    body = decode_body(content_type, data)
    if body is None:
        return None
    return json.dumps(link_object(body, owner, link), separators=(",", ":")).encode()


def child_ref(target: Target, body: dict[str, Any], link: Link, *, kind: str = "", name: str = "") -> ChildRef:
    """The dependent a write produced; ``kind``/``name`` fill in what the body lacks (generateName)."""
    metadata = objects.meta(body)
    return ChildRef(
        api_version=target.api_version, group=target.group, version=target.version,
        kind=str(body.get("kind") or kind), plural=target.plural, namespace=target.namespace or "",
        name=name or target.name or str(metadata.get("name") or ""), link=link,
    )
