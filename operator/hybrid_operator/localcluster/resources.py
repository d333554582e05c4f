"""The resource registry: which kinds the embedded API server serves, and how.

Discovery, OpenAPI, URL routing and storage all ask this registry what a
``plural`` in a group/version is: its kind, scope, verbs, short names,
subresources and (for custom resources) schema and printer columns.  Built-in
kinds are declared once here; CustomResourceDefinitions add and remove kinds
at runtime through :meth:`Registry.register_crd` / :meth:`Registry.unregister_crd`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator.localcluster import objects

# Storage keys of the kinds the server itself gives behaviour to.
NAMESPACES_KEY = "/namespaces"
SERVICES_KEY = "/services"
CRDS_KEY = "apiextensions.k8s.io/customresourcedefinitions"
DEPLOYMENTS_KEY = "apps/deployments"
REPLICASETS_KEY = "apps/replicasets"
STATEFULSETS_KEY = "apps/statefulsets"
DAEMONSETS_KEY = "apps/daemonsets"
CONTROLLERREVISIONS_KEY = "apps/controllerrevisions"
JOBS_KEY = "batch/jobs"
CRONJOBS_KEY = "batch/cronjobs"
PODS_KEY = "/pods"
NODES_KEY = "/nodes"
SERVICEACCOUNTS_KEY = "/serviceaccounts"
CONFIGMAPS_KEY = "/configmaps"
ENDPOINTS_KEY = "/endpoints"
EVENTS_KEY = "/events"
PERSISTENTVOLUMECLAIMS_KEY = "/persistentvolumeclaims"
PERSISTENTVOLUMES_KEY = "/persistentvolumes"
ENDPOINTSLICES_KEY = "discovery.k8s.io/endpointslices"
LEASES_KEY = "coordination.k8s.io/leases"
STORAGECLASSES_KEY = "storage.k8s.io/storageclasses"

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NO_COLLECTION_DELETE = ("create", "delete", "get", "list", "patch", "update", "watch")
CREATE_ONLY = ("create",)  # reviews: answered, never stored (see apiserver/handlers/reviews.py)


@dataclass(frozen=True)
class ResourceInfo:
    """One served resource (a plural in one group/version)."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    custom: bool = False
    schema: dict[str, Any] | None = None
    printer_columns: tuple[dict[str, Any], ...] = ()
    # Kinds without spec/status (ConfigMap, Secret, ...) have no generation.
    has_generation: bool = True

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> str:
        """Where objects live, shared by every served version of a group/plural."""
        return f"{self.group}/{self.plural}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


def _res(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    *,
    short: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    cats: tuple[str, ...] = (),
    generation: bool = True,
    verbs: tuple[str, ...] = ALL_VERBS,
) -> ResourceInfo:
    return ResourceInfo(
        group=group,
        version=version,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        short_names=short,
        categories=cats,
        verbs=verbs,
        subresources=sub,
        has_generation=generation,
    )


_core = functools.partial(_res, "", "v1")
"""A core/v1 resource (``_res`` without group and version)."""

BUILTINS: tuple[ResourceInfo, ...] = (
    _core("namespaces", "Namespace", False, short=("ns",), sub=("status", "finalize"), generation=False,
          verbs=NO_COLLECTION_DELETE),
    _core("configmaps", "ConfigMap", short=("cm",), generation=False),
    _core("secrets", "Secret", generation=False),
    _core("services", "Service", short=("svc",), sub=("status",), cats=("all",), verbs=NO_COLLECTION_DELETE),
    _core("serviceaccounts", "ServiceAccount", short=("sa",), generation=False),
    _core("pods", "Pod", short=("po",), sub=("status",), cats=("all",)),
    _core("events", "Event", short=("ev",), generation=False),
    _core("endpoints", "Endpoints", short=("ep",), generation=False),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",), sub=("status",)),
    _core("persistentvolumes", "PersistentVolume", False, short=("pv",), sub=("status",)),
    _core("nodes", "Node", False, short=("no",), sub=("status",)),
    _core("resourcequotas", "ResourceQuota", short=("quota",), sub=("status",)),
    _core("limitranges", "LimitRange", short=("limits",)),
    _res("apps", "v1", "deployments", "Deployment", short=("deploy",), sub=("status", "scale"), cats=("all",)),
    _res("apps", "v1", "statefulsets", "StatefulSet", short=("sts",), sub=("status", "scale"), cats=("all",)),
    _res("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), sub=("status",), cats=("all",)),
    _res("apps", "v1", "replicasets", "ReplicaSet", short=("rs",), sub=("status", "scale"), cats=("all",)),
    _res("apps", "v1", "controllerrevisions", "ControllerRevision", generation=False),
    _res("batch", "v1", "jobs", "Job", sub=("status",), cats=("all",)),
    _res("batch", "v1", "cronjobs", "CronJob", short=("cj",), sub=("status",), cats=("all",)),
    _res("networking.k8s.io", "v1", "ingresses", "Ingress", short=("ing",), sub=("status",)),
    _res("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short=("netpol",)),
    _res("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False),
    _res("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",), sub=("status",)),
    _res("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", short=("hpa",),
         sub=("status",), cats=("all",)),
    _res("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", short=("hpa",),
         sub=("status",), cats=("all",)),
    _res("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False, generation=False,
         verbs=CREATE_ONLY),
    _res("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, generation=False, verbs=CREATE_ONLY),
    _res("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
         generation=False, verbs=CREATE_ONLY),
    _res("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
         generation=False, verbs=CREATE_ONLY),
    _res("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False, generation=False,
         verbs=CREATE_ONLY),
    _res("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", generation=False,
         verbs=CREATE_ONLY),
    _res("rbac.authorization.k8s.io", "v1", "roles", "Role", generation=False),
    _res("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", generation=False),
    _res("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, generation=False),
    _res("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
         generation=False),
    _res("coordination.k8s.io", "v1", "leases", "Lease", generation=False),
    _res("events.k8s.io", "v1", "events", "Event", short=("ev",), generation=False),
    _res("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", generation=False),
    _res("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short=("sc",), generation=False),
    _res("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short=("pc",), generation=False),
    _res("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
         short=("crd", "crds"), sub=("status",), cats=("api-extensions",)),
    _res("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
         "ValidatingWebhookConfiguration", False, cats=("api-extensions",)),
    _res("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
         "MutatingWebhookConfiguration", False, cats=("api-extensions",)),
)

# Group preference order in discovery, as kube-apiserver lists them.
GROUP_ORDER = (
    "", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "autoscaling", "batch",
    "networking.k8s.io", "policy",
    "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
    "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "discovery.k8s.io",
)


def crd_resources(crd: dict[str, Any]) -> list[ResourceInfo]:
    """The served versions of a CustomResourceDefinition, as resources."""
    spec = crd.get("spec") or {}
    return [_crd_version(spec, version) for version in spec.get("versions") or [] if version.get("served", True)]


def _crd_version(spec: dict[str, Any], version: dict[str, Any]) -> ResourceInfo:
    names = spec.get("names") or {}
    kind = str(names.get("kind", ""))
    subs = version.get("subresources") or {}
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    return ResourceInfo(
        group=str(spec.get("group", "")),
        version=str(version.get("name", "")),
        plural=str(names.get("plural", "")),
        singular=str(names.get("singular") or kind.lower()),
        kind=kind,
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        subresources=tuple(name for name in ("status", "scale") if name in subs),
        custom=True,
        schema=schema if isinstance(schema, dict) else None,
        printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
    )


def storage_version(crd: dict[str, Any]) -> str:
    versions = (crd.get("spec") or {}).get("versions") or []
    for version in versions:
        if version.get("storage"):
            return str(version.get("name"))
    return str(versions[0].get("name")) if versions else ""


@dataclass
class Registry:
    """All served resources, indexed for routing and discovery."""

    _by_gvr: dict[tuple[str, str, str], ResourceInfo] = field(default_factory=dict)
    _crd_owned: dict[str, list[ResourceInfo]] = field(default_factory=dict)
    generation: int = 0

    @classmethod
    def with_builtins(cls) -> Registry:
        registry = cls()
        for info in BUILTINS:
            registry._by_gvr[(info.group, info.version, info.plural)] = info
        return registry

    def lookup(self, group: str, version: str, plural: str) -> ResourceInfo | None:
        return self._by_gvr.get((group, version, plural))

    def versions_of(self, storage_key: str) -> list[ResourceInfo]:
        return [info for info in self._by_gvr.values() if info.storage_key == storage_key]

    def all(self) -> list[ResourceInfo]:
        return list(self._by_gvr.values())

    def groups(self) -> dict[str, list[str]]:
        """Group name -> served versions (preferred first), in discovery order."""
        found: dict[str, list[str]] = {}
        for info in self._by_gvr.values():
            versions = found.setdefault(info.group, [])
            if info.version not in versions:
                versions.append(info.version)
        order = {name: index for index, name in enumerate(GROUP_ORDER)}
        return dict(sorted(found.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))

    def in_group_version(self, group: str, version: str) -> list[ResourceInfo]:
        return [info for info in self._by_gvr.values() if info.group == group and info.version == version]

    def register_crd(self, crd: dict[str, Any]) -> None:
        name = objects.name(crd)
        self.unregister_crd(name)
        infos = crd_resources(crd)
        for info in infos:
            self._by_gvr[(info.group, info.version, info.plural)] = info
        self._crd_owned[name] = infos
        self.generation += 1

    def unregister_crd(self, name: str) -> None:
        for info in self._crd_owned.pop(name, []):
            self._by_gvr.pop((info.group, info.version, info.plural), None)
            self.generation += 1

    def fingerprint(self, group: str, version: str) -> str:
        """Changes whenever the resources of a group/version change (OpenAPI hash)."""
        data = [
            (info.plural, info.kind, info.namespaced, info.subresources, info.schema)
            for info in sorted(self.in_group_version(group, version), key=lambda i: i.plural)
        ]
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16].upper()
