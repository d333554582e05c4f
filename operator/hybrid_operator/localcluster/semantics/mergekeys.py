"""Hand-written merge metadata for the lists and maps of the built-in kinds we serve.

kube-apiserver takes this from the Go struct tags (``patchStrategy``,
``patchMergeKey``, ``listType``, ``listMapKey``, ``structType``/``mapType``).
Strategic merge patch uses the *strategy* and *merge key*; server-side apply uses
the *list type*, the *list-map keys* and whether a map is atomic.  Both come from
the same table here, keyed by field paths relative to the object with list
positions dropped (``("spec", "template", "spec", "containers", "ports")``).

Anything not in the table is an atomic list (replaced as a whole) and a granular
map, which is also what kube-apiserver does for custom resources without
``x-kubernetes-list-type`` markers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Path = tuple[str, ...]
Strategy = Literal["merge", "replace"]
ListType = Literal["map", "set", "atomic"]


@dataclass(frozen=True)
class ListInfo:
    """How one list field merges.

    ``key_defaults`` fills list-map keys the API server would default (a port's
    ``protocol`` is ``TCP``), so an item written without them still matches.
    """

    strategy: Strategy = "replace"
    merge_key: str | None = None
    list_type: ListType = "atomic"
    map_keys: tuple[str, ...] = ()
    key_defaults: Mapping[str, Any] = field(default_factory=dict)


ATOMIC = ListInfo()


def _map_list(*keys: str, defaults: Mapping[str, Any] | None = None) -> ListInfo:
    """A list merged by ``keys[0]`` (patch merge key) and keyed by all ``keys`` for apply."""
    return ListInfo("merge", keys[0], "map", keys, defaults or {})


_SET = ListInfo("merge", None, "set")
_PORT_KEYS = {"protocol": "TCP"}

# Lists inside a Container (also InitContainer and EphemeralContainer).
_CONTAINER_LISTS: dict[Path, ListInfo] = {
    ("ports",): _map_list("containerPort", "protocol", defaults=_PORT_KEYS),
    ("env",): _map_list("name"),
    ("volumeMounts",): _map_list("mountPath"),
    ("volumeDevices",): _map_list("devicePath"),
    ("resizePolicy",): ATOMIC,
    ("envFrom",): ATOMIC,
}

_CONTAINER_FIELDS = ("containers", "initContainers", "ephemeralContainers")

# Lists inside a PodSpec.
_POD_SPEC_LISTS: dict[Path, ListInfo] = {
    ("volumes",): _map_list("name"),
    ("imagePullSecrets",): _map_list("name"),
    ("hostAliases",): _map_list("ip"),
    ("schedulingGates",): _map_list("name"),
    ("resourceClaims",): _map_list("name"),
    ("topologySpreadConstraints",): _map_list("topologyKey", "whenUnsatisfiable"),
    ("tolerations",): ATOMIC,
    ("readinessGates",): ATOMIC,
}

# Lists inside any ObjectMeta.
_META_LISTS: dict[Path, ListInfo] = {
    ("ownerReferences",): _map_list("uid"),
    ("finalizers",): _SET,
}

# Atomic maps inside a PodSpec.
_POD_SPEC_ATOMIC_MAPS: tuple[Path, ...] = (("nodeSelector",),)

# Where the PodSpec and the pod template's ObjectMeta sit in each workload kind.
_POD_SPECS: dict[str, tuple[Path, ...]] = {
    "Pod": (("spec",),),
    "Deployment": (("spec", "template", "spec"),),
    "StatefulSet": (("spec", "template", "spec"),),
    "DaemonSet": (("spec", "template", "spec"),),
    "ReplicaSet": (("spec", "template", "spec"),),
    "ReplicationController": (("spec", "template", "spec"),),
    "Job": (("spec", "template", "spec"),),
    "CronJob": (("spec", "jobTemplate", "spec", "template", "spec"),),
    "PodTemplate": (("template", "spec"),),
}

_STATUS_CONDITIONS: dict[Path, ListInfo] = {("status", "conditions"): _map_list("type")}

# Kind-specific lists outside the pod spec.
_KIND_LISTS: dict[str, dict[Path, ListInfo]] = {
    "Service": {
        ("spec", "ports"): _map_list("port", "protocol", defaults=_PORT_KEYS),
        ("spec", "externalIPs"): ATOMIC,
        ("spec", "clusterIPs"): ATOMIC,
        ("spec", "ipFamilies"): ATOMIC,
        ("spec", "loadBalancerSourceRanges"): ATOMIC,
        ("status", "loadBalancer", "ingress"): ATOMIC,
    },
    "StatefulSet": {("spec", "volumeClaimTemplates"): ATOMIC},
    "Role": {("rules",): ATOMIC},
    "ClusterRole": {("rules",): ATOMIC, ("aggregationRule", "clusterRoleSelectors"): ATOMIC},
    "RoleBinding": {("subjects",): ATOMIC},
    "ClusterRoleBinding": {("subjects",): ATOMIC},
    "Ingress": {("spec", "rules"): ATOMIC, ("spec", "tls"): ATOMIC},
    "PersistentVolumeClaim": {("spec", "accessModes"): ATOMIC},
    "Namespace": {("spec", "finalizers"): ATOMIC},
    "ServiceAccount": {("secrets",): _map_list("name"), ("imagePullSecrets",): ATOMIC},
    "Pod": {
        ("status", "containerStatuses"): ATOMIC,
        ("status", "initContainerStatuses"): ATOMIC,
        ("status", "podIPs"): _map_list("ip"),
    },
}

# Kinds whose status carries ``conditions`` keyed by ``type``.
_CONDITION_KINDS = (
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "ReplicationController",
    "Job",
    "Namespace",
    "PersistentVolumeClaim",
    "Service",
    "CustomResourceDefinition",
)

# Kind-specific atomic maps (label selectors are ``structType=atomic``).
_SELECTOR_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")
_KIND_ATOMIC_MAPS: dict[str, tuple[Path, ...]] = {
    **{kind: (("spec", "selector"),) for kind in _SELECTOR_KINDS},
    "Service": (("spec", "selector"),),
    "ReplicationController": (("spec", "selector"),),
    "RoleBinding": (("roleRef",),),
    "ClusterRoleBinding": (("roleRef",),),
}


def _pod_tables(prefix: Path) -> tuple[dict[Path, ListInfo], list[Path]]:
    """The list and atomic-map entries of one PodSpec found at ``prefix``."""
    lists = {prefix + path: info for path, info in _POD_SPEC_LISTS.items()}
    for container_field in _CONTAINER_FIELDS:
        lists[(*prefix, container_field)] = _map_list("name")
        for path, info in _CONTAINER_LISTS.items():
            lists[(*prefix, container_field, *path)] = info
    template_meta = (*prefix[:-1], "metadata")
    if prefix != ("spec",):
        lists.update({template_meta + path: info for path, info in _META_LISTS.items()})
    return lists, [prefix + path for path in _POD_SPEC_ATOMIC_MAPS]


def _build_lists(kind: str) -> tuple[dict[Path, ListInfo], frozenset[Path]]:
    lists: dict[Path, ListInfo] = {("metadata", *path): info for path, info in _META_LISTS.items()}
    atomic_maps: list[Path] = list(_KIND_ATOMIC_MAPS.get(kind, ()))
    for prefix in _POD_SPECS.get(kind, ()):
        pod_lists, pod_maps = _pod_tables(prefix)
        lists.update(pod_lists)
        atomic_maps.extend(pod_maps)
    if kind in _CONDITION_KINDS:
        lists.update(_STATUS_CONDITIONS)
    lists.update(_KIND_LISTS.get(kind, {}))
    return lists, frozenset(atomic_maps)


_CACHE: dict[str, tuple[dict[Path, ListInfo], frozenset[Path]]] = {}


def _tables(kind: str) -> tuple[dict[Path, ListInfo], frozenset[Path]]:
    if kind not in _CACHE:
        _CACHE[kind] = _build_lists(kind)
    return _CACHE[kind]


def list_info(kind: str, path: Path) -> ListInfo:
    """Merge metadata of the list at ``path`` in an object of ``kind`` (atomic if unknown)."""
    return _tables(kind)[0].get(tuple(path), ATOMIC)


def list_strategy(kind: str, path: Path) -> tuple[Strategy, str | None, tuple[str, ...]]:
    """Strategic-merge view: ``(strategy, merge_key, list_map_keys)`` of a list field."""
    info = list_info(kind, path)
    return info.strategy, info.merge_key, info.map_keys


def list_type(kind: str, path: Path) -> tuple[ListType, tuple[str, ...]]:
    """Server-side-apply view: ``(x-kubernetes-list-type, x-kubernetes-list-map-keys)``."""
    info = list_info(kind, path)
    return info.list_type, info.map_keys


def map_is_atomic(kind: str, path: Path) -> bool:
    """Whether the map at ``path`` is replaced as a whole by apply (``structType=atomic``)."""
    return tuple(path) in _tables(kind)[1]
