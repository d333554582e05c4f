"""What the operator and its automation may do in the cluster: needs derived from the project, and rules.

The ClusterRole in ``config/rbac/role.yaml`` is generated, not written by hand: every
(group, resource, verb) the operator itself needs (its watched kinds, their ``/status`` and
``/finalizers``, events, leases, CRD and namespace scans) plus what the automation touches --
the Kubernetes modules called in ``roles/*/tasks``, ``roles/*/handlers`` and ``playbooks/`` and the
kinds in ``charts/*/templates`` -- and the child kinds a schema file declares. The same derivation
backs the test that checks the committed role, so the generator and the check cannot disagree.

A module call whose ``apiVersion``/``kind`` is templated cannot be resolved: that is an error asking
for literal values (or a ``children`` declaration in the kind's schema file). A ``kind`` that is not
a kind of its built-in group (``configmapps``) is a warning naming the file and line: the rule for it
would grant nothing. A chart template rendering ``kind: List`` contributes the kinds of its items.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hybrid_operator.authoring import kinds
from hybrid_operator.errors import ConfigurationError

log = logging.getLogger(__name__)

ALL_CHILD_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
KIND_VERBS = ("get", "list", "watch", "patch", "update")
SUBRESOURCE_VERBS = ("get", "patch", "update")
K8S_MODULES = frozenset({"kubernetes.core.k8s", "k8s", "community.kubernetes.k8s"})
INFO_MODULES = frozenset({"kubernetes.core.k8s_info", "k8s_info", "community.kubernetes.k8s_info"})
STATUS_MODULES = frozenset({"operator_sdk.util.k8s_status", "k8s_status"})
EVENT_MODULES = frozenset({"operator_sdk.util.k8s_event", "k8s_event"})
KNOWN_MODULES = K8S_MODULES | INFO_MODULES | STATUS_MODULES | EVENT_MODULES

#: (apiVersion, kind) -> (group, plural), or None when the kind is unknown.
Resolver = Callable[[str, str], "tuple[str, str] | None"]


@dataclass(frozen=True)
class Need:
    """One (group, resource, verb) the operator or an automation needs, and why."""

    group: str
    resource: str
    verb: str
    why: str


@dataclass(frozen=True)
class Rule:
    """One ClusterRole rule, with the comment explaining it (empty: same section as the previous rule)."""

    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    comment: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"apiGroups": list(self.groups), "resources": list(self.resources), "verbs": list(self.verbs)}


FIXED_RULES = (
    Rule(("",), ("events",), ("create", "patch"),
         "Reconcile results and the automation's own events (operator_sdk.util.k8s_event)."),
    Rule(("coordination.k8s.io",), ("leases",), ALL_CHILD_VERBS, "Leader election."),
    Rule(("apiextensions.k8s.io",), ("customresourcedefinitions",), ("get", "list", "watch"),
         "kopf scans CRDs to resolve the watched kinds, and namespaces to follow them."),
    Rule(("",), ("namespaces",), ("list", "watch")),
)


# -- reading the automation --------------------------------------------------------------------------


def template_kinds(text: str) -> list[tuple[str, str]]:
    """(apiVersion, kind) of each top-level document of a YAML (or Go/Jinja) template; the items of a
    ``kind: List`` document instead of the List itself."""
    found = []
    for document in re.split(r"(?m)^---\s*$", text):
        api = re.search(r"(?m)^apiVersion:\s*['\"]?([\w./-]+)", document)
        kind = re.search(r"(?m)^kind:\s*['\"]?(\w+)", document)
        if api and kind and kind.group(1) == "List":
            found += list_item_kinds(document)
        elif api and kind:
            found.append((api.group(1), kind.group(1)))
    return found


_ITEM_START = re.compile(r"^(\s*)-\s+(.*)$")
_KEY_VALUE = re.compile(r"^(apiVersion|kind):\s*['\"]?([\w./-]+)")


def list_item_kinds(document: str) -> list[tuple[str, str]]:
    """(apiVersion, kind) of the items of a ``kind: List`` document, read by indentation (the document may
    be a Go or Jinja template, so it is not parsed as YAML): the keys at the items' own level only, not
    the ``kind`` of a nested ``roleRef`` or ``ownerReferences``."""
    lines = document.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"^items:\s*$", line)), None)
    if start is None:
        return []
    items: list[dict[str, str]] = []
    key_column: int | None = None
    for line in lines[start + 1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "{{")):
            continue
        if not line[0].isspace() and not line.startswith("-"):
            break  # the next top-level key
        item = _ITEM_START.match(line)
        if item and (key_column is None or len(item.group(1)) + 2 == key_column):
            key_column = len(item.group(1)) + 2
            items.append({})
            rest = item.group(2)
        elif key_column is not None and len(line) - len(line.lstrip()) == key_column:
            rest = stripped
        else:
            continue
        pair = _KEY_VALUE.match(rest)
        if pair and items:
            items[-1][pair.group(1)] = pair.group(2)
    return [(item["apiVersion"], item["kind"]) for item in items if "apiVersion" in item and "kind" in item]


def module_calls(node: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (module name, arguments) of a Kubernetes module anywhere in a task file or playbook."""
    if isinstance(node, list):
        for item in node:
            yield from module_calls(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in KNOWN_MODULES and isinstance(value, dict):
                yield key, value
            else:
                yield from module_calls(value)


class _Deriver:
    """Turns module calls and chart templates into needs, resolving kinds through ``resolve``."""

    def __init__(self, root: Path, resolve: Resolver) -> None:
        self.root = root
        self.resolve = resolve
        self.warned: set[str] = set()

    def where(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def resource(self, api_version: Any, kind: Any, why: str, source: Path | None = None) -> tuple[str, str]:
        if not isinstance(api_version, str) or not isinstance(kind, str) or "{{" in api_version + kind:
            raise ConfigurationError(
                f"{why}: apiVersion/kind must be literal to derive RBAC rules, got {api_version!r} {kind!r}; "
                "write them literally, or declare the kinds under children: in the kind's schemas/ file")
        found = self.resolve(api_version, kind)
        if found is None:
            raise ConfigurationError(f"{why}: unknown kind {api_version} {kind}; add it to watches.yaml, "
                                     "or use a built-in kind")
        self.check_kind(api_version, kind, source)
        return found

    def check_kind(self, api_version: str, kind: str, source: Path | None) -> None:
        """Warn (once per file and kind) about a kind its built-in group does not have: a typo."""
        group = api_version.rpartition("/")[0]
        known = kinds.lookup(group, kind)
        if not known.builtin_group or known.plural is not None:
            return
        where = self.where(source) if source is not None else "watches.yaml"
        line = _line_of(source, kind) if source is not None else None
        location = f"{where}:{line}" if line else where
        if location + kind in self.warned:
            return
        self.warned.add(location + kind)
        hint = f"; did you mean {known.suggestion}?" if known.suggestion else ""
        log.warning("%s: kind %r is not a kind of %s (the RBAC rule generated for it grants nothing)%s",
                    location, kind, api_version, hint)

    def k8s(self, args: dict[str, Any], source: Path) -> list[Need]:
        why = self.where(source)
        definition = args.get("definition")
        definition = definition if isinstance(definition, dict) else {}
        targets: list[tuple[Any, Any]] = [(args.get("api_version", definition.get("apiVersion")),
                                           args.get("kind", definition.get("kind")))]
        if "template" in args:  # definitions rendered from a role's templates/
            template = source.parent.parent / "templates" / str(args["template"])
            try:
                targets = list(template_kinds(template.read_text(encoding="utf-8")))
            except OSError as exc:
                raise ConfigurationError(f"{why}: cannot read template {template}: {exc.strerror}") from exc
        state = str(args.get("state", "present"))
        states = {"present", "absent"} if "{{" in state else {state}
        verbs = {"get"}
        if "present" in states:
            verbs |= {"create", "patch"} | ({"update"} if args.get("force") else set())
        if "absent" in states:
            verbs.add("delete")
        needs = []
        for target_api, target_kind in targets:
            group, plural = self.resource(target_api, target_kind, why, source)
            label = f"{why}: {target_kind} state={'/'.join(sorted(states))}"
            needs += [Need(group, plural, verb, label) for verb in sorted(verbs)]
        return needs

    def automation(self, source: Path) -> list[Need]:
        why = self.where(source)
        try:
            content = yaml.safe_load(source.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{why}: not valid YAML: {exc}") from exc
        needs: list[Need] = []
        for module, args in module_calls(content):
            if module in K8S_MODULES:
                needs += self.k8s(args, source)
            elif module in INFO_MODULES:
                group, plural = self.resource(args.get("api_version", "v1"), args.get("kind"), why, source)
                needs += [Need(group, plural, verb, f"{why}: k8s_info") for verb in ("get", "list")]
            elif module in STATUS_MODULES:
                group, plural = self.resource(args.get("api_version"), args.get("kind"), why, source)
                needs += [Need(group, plural, "get", f"{why}: k8s_status reads the object"),
                          Need(group, f"{plural}/status", "patch", f"{why}: k8s_status")]
            else:
                needs.append(Need("", "events", "create", f"{why}: k8s_event"))
        return needs

    def chart(self, chart: Path) -> list[Need]:
        why = self.where(chart)
        needs = [Need("", "secrets", verb, f"{why}: helm release storage")
                 for verb in ("get", "list", "create", "update", "delete")]
        for template in sorted((chart / "templates").rglob("*.yaml")):
            for api_version, kind in template_kinds(template.read_text(encoding="utf-8")):
                group, plural = self.resource(api_version, kind, f"{why}/{template.name}", template)
                needs += [Need(group, plural, verb, f"{why}/{template.name}: {kind}") for verb in ALL_CHILD_VERBS]
        return needs


def _line_of(source: Path, kind: str) -> int | None:
    """The first line of ``source`` naming ``kind`` (a ``kind:`` key first), 1-based; None if unreadable."""
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    keyed = re.compile(r"\bkind\s*:\s*['\"]?" + re.escape(kind) + r"\b")
    for pattern in (keyed, re.compile(r"\b" + re.escape(kind) + r"\b")):
        for number, line in enumerate(lines, start=1):
            if pattern.search(line):
                return number
    return None


def automation_sources(root: Path) -> list[Path]:
    """The task files, handlers and playbooks of a project, in a stable order."""
    roles = root / "roles"
    found = [*roles.glob("*/tasks/**/*.yml"), *roles.glob("*/tasks/**/*.yaml"),
             *roles.glob("*/handlers/**/*.yml"), *roles.glob("*/handlers/**/*.yaml"),
             *(root / "playbooks").glob("*.yml"), *(root / "playbooks").glob("*.yaml")]
    return sorted(set(found))


def chart_dirs(root: Path) -> list[Path]:
    return sorted(path.parent for path in (root / "charts").glob("*/Chart.yaml"))


@dataclass(frozen=True)
class WatchedKind:
    """A kind the operator reconciles: its CRD group/plural, declared child kinds and trigger kinds.

    ``children`` and ``related`` hold (apiVersion, kind) pairs: children are managed (all verbs),
    related kinds (``triggers`` in watches.yaml) are only read and watched.
    """

    group: str
    plural: str
    kind: str
    children: tuple[tuple[str, str], ...] = ()
    related: tuple[tuple[str, str], ...] = ()


def operator_needs(kinds: Iterable[WatchedKind]) -> list[Need]:
    needs = [
        Need("", "events", "create", "operator: reconcile events"),
        Need("", "events", "patch", "operator: reconcile events"),
        Need("apiextensions.k8s.io", "customresourcedefinitions", "list", "kopf: scanning"),
        Need("apiextensions.k8s.io", "customresourcedefinitions", "watch", "kopf: scanning"),
        Need("", "namespaces", "list", "kopf: namespaces"),
        Need("", "namespaces", "watch", "kopf: namespaces"),
        *(Need("coordination.k8s.io", "leases", verb, "leader election") for verb in ("get", "create", "update")),
    ]
    for kind in kinds:
        why = f"watches.yaml {kind.kind}"
        needs += [Need(kind.group, kind.plural, verb, why) for verb in ("get", "list", "watch", "patch")]
        needs += [Need(kind.group, f"{kind.plural}/status", verb, why) for verb in ("get", "patch", "update")]
        needs.append(Need(kind.group, f"{kind.plural}/finalizers", "update", why))
    return needs


def derive_needs(root: Path, kinds: list[WatchedKind], resolve: Resolver) -> list[Need]:
    """Everything the operator (for ``kinds``) and the project's automation need."""
    deriver = _Deriver(root, resolve)
    needs = operator_needs(kinds)
    for source in automation_sources(root):
        needs += deriver.automation(source)
    for chart in chart_dirs(root):
        needs += deriver.chart(chart)
    for kind in kinds:
        for api_version, child in kind.children:
            group, plural = deriver.resource(api_version, child, f"schemas: {kind.kind} children")
            needs += [Need(group, plural, verb, f"{kind.kind} declares {child}") for verb in ALL_CHILD_VERBS]
        for api_version, related in kind.related:
            group, plural = deriver.resource(api_version, related, f"watches.yaml {kind.kind} triggers")
            needs += [Need(group, plural, verb, f"{kind.kind} is triggered by {related}")
                      for verb in ("get", "list", "watch")]
    return needs


def allows(rules: Iterable[dict[str, Any]], need: Need) -> bool:
    def matches(values: list[str], wanted: str) -> bool:
        return "*" in values or wanted in values

    return any(matches(rule.get("apiGroups", []), need.group) and matches(rule.get("resources", []), need.resource)
               and matches(rule.get("verbs", []), need.verb) for rule in rules)


def rules_for(kinds: list[WatchedKind], needs: Iterable[Need]) -> list[Rule]:
    """The ClusterRole rules: watched kinds, their subresources, the fixed ones, then the children."""
    unique = list(dict.fromkeys((kind.group, kind.plural) for kind in kinds))
    rules = [Rule((group,), (resource,), KIND_VERBS,
                  "" if index else "The custom resources of every kind in watches.yaml: watched, read, "
                                   "finalizers added/removed.")
             for index, (group, resource) in enumerate(unique)]
    rules += [Rule((group,), (f"{resource}/status", f"{resource}/finalizers"), SUBRESOURCE_VERBS,
                   "" if index else "Their status (conditions, results, k8s_status) and finalizers subresources.")
              for index, (group, resource) in enumerate(unique)]
    rules += FIXED_RULES
    granted = [rule.to_dict() for rule in rules]
    children: dict[str, set[str]] = {}
    for need in needs:
        if not allows(granted, need):
            children.setdefault(need.group, set()).add(need.resource)
    for index, group in enumerate(sorted(children)):
        comment = "" if index else "What the automation (roles, playbooks, charts) creates, reads, watches and deletes."
        rules.append(Rule((group,), tuple(sorted(children[group])), ALL_CHILD_VERBS, comment))
    return rules
