"""What a rendered Helm manifest may not contain: duplicate mapping keys, and objects in other namespaces.

Why this module exists: a CR's spec becomes a release's values, and a chart that writes a value
without quoting it lets that value add YAML of its own (issue 28 item 4). A newline in
``spec.image.pullPolicy`` of the memcached sample added a ConfigMap in ``kube-system`` and a
ClusterRoleBinding; a repeated ``image:`` key beat ``overrideValues`` (YAML parsers keep one of two
equal keys, which one depends on the parser). So before helm applies anything, the exact manifest it
is about to apply (:mod:`hybrid_operator.helm.gate`) is read here:

* :func:`duplicate_keys` -- any mapping, at any depth of any document, with a key twice (keys are
  compared by their text, so ``1`` and ``"1"`` count as equal, as they are once converted to JSON;
  a ``<<`` merge that brings in a key already there counts too) is a problem naming the object and
  the key's path. A manifest that does not parse is a problem too.
* :func:`namespaced_elsewhere` -- the objects whose ``metadata.namespace`` names a namespace other
  than the release's (a ``List``'s items included, as helm applies them). Whether each kind is
  namespaced is the API server's answer (the gate asks the cluster's discovery); this module only
  lists the candidates.

Both work on the parsed node graph without expanding aliases (each node is visited once), so a
hostile manifest cannot make them slow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

try:  # libyaml when present: manifests can be large
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - PyYAML without libyaml
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

#: ``(apiVersion, kind)`` -> namespaced (True), cluster-scoped (False), not known to the API server (None)
Namespaced = Callable[[str, str], "bool | None"]
_MERGE_TAG = "tag:yaml.org,2002:merge"
#: problems listed in one message at most (the rest are counted)
MAX_LISTED = 10


@dataclass(frozen=True)
class Placement:
    """An object that names a namespace other than the release's."""

    api_version: str
    kind: str
    name: str
    namespace: str

    def describe(self) -> str:
        return f"{self.kind} {self.name or '(no name)'} ({self.api_version})"


def refusals(manifest: str, namespace: str, *, cross_namespace: bool, namespaced: Namespaced) -> list[str]:
    """Why ``manifest`` may not be applied for a release in ``namespace`` (empty: it may).

    Duplicate keys always count; objects in other namespaces only without ``cross_namespace``
    (``allowCrossNamespace`` of the watch), and only for kinds that are not cluster-scoped: a kind the API
    server does not know (yet) counts as namespaced.
    """
    problems = duplicate_keys(manifest)
    try:
        found = objects_of(manifest)
    except yaml.YAMLError as exc:
        return problems or [f"the manifest is not valid YAML: {_one_line(exc)}"]
    if cross_namespace:
        return problems
    for placement in namespaced_elsewhere(found, namespace):
        scope = namespaced(placement.api_version, placement.kind)
        if scope is False:
            continue
        known = "" if scope else ", a kind the API server does not serve (yet), so taken as namespaced"
        problems.append(f"{placement.describe()} names namespace {placement.namespace}, not the resource's "
                        f"namespace {namespace}{known}")
    return problems


def duplicate_keys(manifest: str) -> list[str]:
    """Every repeated mapping key of ``manifest``, as ``<object>: duplicate key <path>`` (empty: none)."""
    try:
        documents = list(yaml.compose_all(manifest, Loader=_Loader))
    except yaml.YAMLError as exc:
        return [f"the manifest is not valid YAML: {_one_line(exc)}"]
    problems: list[str] = []
    seen: set[int] = set()
    for index, document in enumerate(documents, start=1):
        if document is None:
            continue
        label = _label(document, index)
        for path, key in _repeated(document, seen):
            problems.append(f"{label}: duplicate key {_join(path, key)}")
    return problems


def objects_of(manifest: str) -> list[dict[str, Any]]:
    """The objects helm applies from ``manifest``: each document, and the items of lists (any kind whose name
    ends in ``List`` with an ``items`` list, at any depth), the list itself dropped. Raises yaml.YAMLError."""
    found: list[dict[str, Any]] = []
    for document in yaml.load_all(manifest, Loader=_Loader):
        found.extend(_flatten(document))
    return found


def namespaced_elsewhere(objects: list[dict[str, Any]], namespace: str) -> list[Placement]:
    """The objects whose ``metadata.namespace`` is set and is not ``namespace`` (the release's)."""
    placements = []
    for obj in objects:
        metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        assert isinstance(metadata, dict)
        named = metadata.get("namespace")
        if named in (None, "") or named == namespace:
            continue
        placements.append(Placement(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""),
                                    str(metadata.get("name") or ""), str(named)))
    return placements


def summary(problems: list[str]) -> str:
    """The problems joined for a condition or an Event (the first :data:`MAX_LISTED`, then a count)."""
    listed = "; ".join(problems[:MAX_LISTED])
    more = len(problems) - MAX_LISTED
    return listed + (f"; and {more} more" if more > 0 else "")


def _flatten(document: Any) -> Iterator[dict[str, Any]]:
    pending = [document]
    while pending:
        item = pending.pop(0)
        if not isinstance(item, dict):
            continue
        items = item.get("items")
        if str(item.get("kind") or "").endswith("List") and isinstance(items, list):
            pending[:0] = items
        else:
            yield item


def _repeated(root: yaml.Node, seen: set[int]) -> Iterator[tuple[tuple[str, ...], str]]:
    """(path of the mapping, key) of every key a mapping holds twice; each node is visited once."""
    stack: list[tuple[yaml.Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key in _keys(node):
                if key in keys:
                    yield path, key
                keys.add(key)
            stack.extend((value, (*path, _text(key))) for key, value in reversed(node.value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, f"[{index}]")) for index, item in reversed(list(enumerate(node.value))))


def _keys(node: yaml.MappingNode) -> Iterator[str]:
    """The keys a mapping ends up with: its own, and those its ``<<`` merges bring in."""
    for key, value in node.value:
        if key.tag != _MERGE_TAG:
            yield _text(key)
            continue
        sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
        for source in sources:
            if isinstance(source, yaml.MappingNode):
                yield from _keys(source)


def _text(node: yaml.Node) -> str:
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    return yaml.serialize(node, Dumper=yaml.SafeDumper).strip()


def _label(document: yaml.Node, index: int) -> str:
    """``<Kind> <name>`` of a document node when it says so, else ``document <index>``."""
    kind = _scalar(document, "kind")
    metadata = _child(document, "metadata")
    name = _scalar(metadata, "name") if metadata is not None else ""
    if kind:
        return f"{kind} {name}" if name else f"{kind} (document {index})"
    return f"document {index}"


def _child(node: yaml.Node, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key and isinstance(v, yaml.Node):
            return v
    return None


def _scalar(node: yaml.Node, key: str) -> str:
    child = _child(node, key)
    return str(child.value) if isinstance(child, yaml.ScalarNode) else ""


def _join(path: tuple[str, ...], key: str) -> str:
    text = ""
    for part in (*path, key):
        text += part if part.startswith("[") or not text else f".{part}"
    return text


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
