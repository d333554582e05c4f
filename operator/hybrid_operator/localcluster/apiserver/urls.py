"""Resource URLs: which resource, namespace, object and subresource a path names.

``/api/v1/namespaces/ns/configmaps/x``, ``/apis/apps/v1/deployments``,
``/apis/g/v1/namespaces/ns/widgets/x/status``: kube-apiserver resolves the
segments after the group/version against the served resources, where
``namespaces/<ns>/`` only prefixes namespaced kinds (``/api/v1/namespaces/x``
is the Namespace ``x`` itself).  A path that names nothing served is a 404.
"""

from __future__ import annotations

from dataclasses import dataclass

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.resources import Registry, ResourceInfo

# Subresources that stream from a container (or proxy to one): served so that they can say at once
# that nothing runs here (see routing), instead of a 404 that looks like a missing object.
CONTAINER_SUBRESOURCES: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): ("exec", "attach", "portforward", "log", "proxy", "ephemeralcontainers", "eviction"),
    ("", "services"): ("proxy",),
    ("", "nodes"): ("proxy",),
}


@dataclass(frozen=True)
class Target:
    """A parsed resource URL."""

    info: ResourceInfo
    namespace: str | None  # None: all namespaces (or cluster-scoped)
    name: str
    subresource: str


def resolve(registry: Registry, group: str, version: str, rest: list[str]) -> Target:
    """The target of the path segments ``rest`` after ``/api/v1`` or ``/apis/<group>/<version>``."""
    namespace, rest = _namespace_prefix(registry, group, version, [segment for segment in rest if segment])
    info = registry.lookup(group, version, rest[0]) if rest else None
    if info is not None and len(rest) > 3 and rest[2] == "proxy":
        rest = rest[:3]  # pods/<name>/proxy/<path>: the path goes to the container
    if info is None or len(rest) > 3:
        raise errors.path_not_found()
    name, sub = (*rest[1:], "", "")[:2]
    if not _served(info, namespace, name, sub):
        raise errors.path_not_found()
    return Target(info, namespace, name, sub)


def _served(info: ResourceInfo, namespace: str | None, name: str, sub: str) -> bool:
    """Whether the resource serves this subresource, in this scope."""
    if sub and sub not in info.subresources and sub not in CONTAINER_SUBRESOURCES.get((info.group, info.plural), ()):
        return False
    if namespace is not None:
        return info.namespaced
    return not (info.namespaced and name)


def _namespace_prefix(registry: Registry, group: str, version: str, rest: list[str]) -> tuple[str | None, list[str]]:
    """``namespaces/<ns>/<plural>/...`` of a namespaced kind: the namespace and what follows it."""
    if len(rest) >= 3 and rest[0] == "namespaces":
        candidate = registry.lookup(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            return rest[1], rest[2:]
    return None, rest
