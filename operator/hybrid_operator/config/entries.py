"""Validation of one ``watches.yaml`` entry, key by key, with every problem's line and key.

The SDK ignores unknown keys and silently picks ``playbook`` over ``role``; we refuse to start and
say why (see the module docstring of :mod:`hybrid_operator.config.watches`). :class:`EntryReader`
turns one YAML node into an :class:`~hybrid_operator.config.model.AnsibleWatch` or
:class:`~hybrid_operator.config.model.HelmWatch`, reporting each problem to :class:`Problems`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from hybrid_operator.config.keys import (
    ANSIBLE_KEYS,
    FINALIZER_KEYS,
    HELM_KEYS,
    key_path,
    misspelled,
    unknown_key_message,
)
from hybrid_operator.config.locations import chart_problem, role_candidates
from hybrid_operator.config.model import (
    DEFAULT_MAX_RUNNER_ARTIFACTS,
    AnsibleWatch,
    Finalizer,
    GroupVersionKind,
    HelmWatch,
    LabelSelector,
    LabelSelectorRequirement,
    Trigger,
    Watch,
    expand_env_or_empty,
)
from hybrid_operator.config.values import EXAMPLES as DURATION_EXAMPLES
from hybrid_operator.config.values import DurationError, parse_duration

#: an Ansible variable name
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SELECTOR_KEYS = frozenset({"matchLabels", "matchExpressions"})
REQUIREMENT_KEYS = frozenset({"key", "operator", "values"})
GVK_KEYS = frozenset({"group", "version", "kind"})
TRIGGER_KEYS = GVK_KEYS | {"match"}
FIELD_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_./-]+)*$")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
DRY_RUN_OPTIONS = {"": "client", "client": "client", "server": "server"}

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_GROUP = re.compile(rf"({_DNS_LABEL}(\.{_DNS_LABEL})*)?")
_VERSION = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_STRVALS_PATH = re.compile(r"((?:[^.\[\]\\]|\\.)+(\[[0-9]+\])*)(\.(?:[^.\[\]\\]|\\.)+(\[[0-9]+\])*)*")


class Problems:
    """Collects problem messages for one file; :attr:`items` lists them in line order."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._found: list[tuple[int, str]] = []

    def add(self, line: int | None, message: str) -> None:
        location = f"{self.file}:{line}" if line else self.file
        self._found.append((line or 0, f"{location}: {message}"))

    def __len__(self) -> int:
        return len(self._found)

    @property
    def items(self) -> list[str]:
        return [message for _, message in sorted(self._found, key=lambda found: found[0])]


class EntryReader:
    """Reads and validates one entry, reporting each problem with its line and key."""

    def __init__(
        self, problems: Problems, index: int, node: yaml.Node, data: Any, *, base_dir: Path,
        env: Mapping[str, str],
    ) -> None:
        self.problems = problems
        self.index = index
        self.node = node
        self.raw = data
        self.data: dict[str, Any] = data if isinstance(data, dict) else {}
        self.is_mapping = isinstance(data, dict)
        self.base_dir = base_dir
        self.env = env
        kind = self.data.get("kind")
        self.label = f"entry {index} (kind {kind})" if isinstance(kind, str) and kind else f"entry {index}"

    # -- reporting ---------------------------------------------------------------------------
    def report(self, message: str, *keys: str) -> None:
        key_part = f'key "{key_path(keys)}": ' if keys else ""
        self.problems.add(self._line(keys), f"{self.label}: {key_part}{message}")

    def _line(self, keys: tuple[str, ...]) -> int:
        node = self.node
        line = node.start_mark.line + 1
        for key in keys:
            if isinstance(node, yaml.SequenceNode) and key.startswith("["):
                node = node.value[int(key[1:-1])]
                line = node.start_mark.line + 1
                continue
            if not isinstance(node, yaml.MappingNode):
                break
            found = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key]
            if not found:
                break
            key_node, node = found[-1]
            line = key_node.start_mark.line + 1
        return line

    # -- entry -------------------------------------------------------------------------------
    def read(self) -> Watch | None:
        if not self.is_mapping:
            self.report(f"must be a mapping with group, version, kind and a playbook, role or chart, "
                        f"got {type_name(self.raw)}")
            return None
        self._check_duplicate_keys(self.node, ())
        count = len(self.problems)
        gvk = self._gvk(self.data, ())
        is_helm = "chart" in self.data
        is_ansible = "playbook" in self.data or "role" in self.data
        if is_helm and is_ansible:
            self.report("chart cannot be combined with playbook or role: an entry is either a Helm "
                        "entry (chart) or an Ansible entry (playbook or role); split it or remove one")
            self._check_keys(self.data, ANSIBLE_KEYS | HELM_KEYS, ())
            return None
        if not is_helm and not is_ansible:
            self._check_keys(self.data, ANSIBLE_KEYS | HELM_KEYS, ())
            # a misspelled one ("rolee") was just reported with its suggestion, which says more
            if not any(misspelled(self.data, key) for key in ("playbook", "role", "chart")):
                self.report("missing playbook, role or chart: set exactly one of them, e.g. "
                            "playbook: playbooks/memcached.yml, role: memcached or chart: helm-charts/nginx")
            return None
        watch = self._helm(gvk) if is_helm else self._ansible(gvk)
        return watch if len(self.problems) == count else None

    def _check_duplicate_keys(self, node: yaml.Node, path: tuple[str, ...]) -> None:
        if not isinstance(node, yaml.MappingNode):
            return
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            if key_node.value in seen:
                self.problems.add(key_node.start_mark.line + 1,
                                  f'{self.label}: key "{key_path((*path, key_node.value))}": appears twice '
                                  "in the same mapping (YAML keeps only the last); remove one")
            seen.add(key_node.value)
            if key_node.value in ("finalizer", "selector") and not path:
                self._check_duplicate_keys(value_node, (key_node.value,))

    def _check_keys(self, mapping: Mapping[Any, Any], allowed: frozenset[str], path: tuple[str, ...]) -> None:
        for key in mapping:
            if not isinstance(key, str):
                self.report(f"keys must be strings, got {key!r}", *path)
            elif key not in allowed:
                self.report(unknown_key_message(key, allowed, path), *path, key)

    def _gvk(self, mapping: Mapping[str, Any], path: tuple[str, ...]) -> GroupVersionKind:
        group = self._string(mapping, "group", path, default="")
        version = self._string(mapping, "version", path, default="")
        kind = self._string(mapping, "kind", path, default="")
        if group and not _GROUP.fullmatch(group):
            self.report(f"invalid group {group!r}: use a lowercase DNS name such as cache.example.com, "
                        "or \"\" for the core group", *path, "group")
        if not version and mapping.get("version") in (None, "") and not misspelled(mapping, "version"):
            self.report("version must not be empty: set the CRD version such as v1alpha1", *path, "version")
        elif version and not _VERSION.fullmatch(version):
            self.report(f"invalid version {version!r}: use the CRD version alone, such as v1 or v1beta1 "
                        "(the group goes in \"group\")", *path, "version")
        if not kind and mapping.get("kind") in (None, "") and not misspelled(mapping, "kind"):
            self.report("kind must not be empty: set the CRD kind such as Memcached", *path, "kind")
        elif kind and not _KIND.fullmatch(kind):
            self.report(f"invalid kind {kind!r}: use the CRD kind, letters and digits only, "
                        "such as Memcached", *path, "kind")
        return GroupVersionKind(group, version, kind)

    # -- typed values ------------------------------------------------------------------------
    def _string(self, mapping: Mapping[str, Any], key: str, path: tuple[str, ...], *, default: str) -> str:
        value = mapping.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.report(f"must be a string, got {type_name(value)} {value!r}; quote it", *path, key)
            return default
        return value

    def _bool(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.report(f"must be true or false (unquoted), got {type_name(value)} {value!r}", key)
            return default
        return value

    def _int(self, key: str, *, minimum: int) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.report(f"must be a whole number, got {type_name(value)} {value!r}", key)
            return None
        if value < minimum:
            self.report(f"must be at least {minimum}, got {value}", key)
            return None
        return value

    def _duration(self) -> timedelta | None:
        value = self.data.get("reconcilePeriod")
        if value is None or (value == 0 and type(value) is int):
            return None  # an unquoted 0 is unambiguous (Go itself would want the string "0")
        if not isinstance(value, str):
            self.report(f"must be a Go duration string such as {DURATION_EXAMPLES}, got "
                        f"{type_name(value)} {value!r}; add a unit and quote it", "reconcilePeriod")
            return None
        try:
            period = parse_duration(value)
        except DurationError as error:
            self.report(f'invalid duration "{value}": {error}', "reconcilePeriod")
            return None
        if period < timedelta(0):
            self.report(f"must not be negative, got {value!r}; use 0 or omit it to use --reconcile-period",
                        "reconcilePeriod")
            return None
        return period or None

    def _vars(self, mapping: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        value = mapping.get("vars")
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.report(f"must be a mapping of variable names to values, got {type_name(value)}",
                        *path, "vars")
            return {}
        for key in value:
            if not isinstance(key, str):
                self.report(f"variable names must be strings, got {key!r}", *path, "vars")
        return dict(value)

    # -- Ansible -----------------------------------------------------------------------------
    def _ansible(self, gvk: GroupVersionKind) -> AnsibleWatch:
        self._check_keys(self.data, ANSIBLE_KEYS, ())
        playbook, role = self._playbook_or_role(self.data, ())
        artifacts = self._int("maxRunnerArtifacts", minimum=0)
        return AnsibleWatch(
            gvk=gvk,
            playbook=playbook,
            role=role,
            vars=self._vars(self.data, ()),
            reconcile_period=self._duration(),
            manage_status=self._bool("manageStatus", True),
            watch_dependent_resources=self._bool("watchDependentResources", True),
            watch_cluster_scoped_resources=self._bool("watchClusterScopedResources", False),
            max_runner_artifacts=artifacts or DEFAULT_MAX_RUNNER_ARTIFACTS,
            finalizer=self._finalizer(),
            selector=self._selector(),
            blacklist=self._blacklist(),
            snake_case_parameters=self._bool("snakeCaseParameters", True),
            mark_unsafe=self._bool("markUnsafe", True),
            watch_annotations_changes=self._bool("watchAnnotationsChanges", False),
            triggers=self._triggers(),
            spec_overrides=self._spec_overrides(),
        )

    def _spec_overrides(self) -> tuple[str, ...]:
        """``specOverrides``: variables the automation sets itself that a spec may still override."""
        value = self.data.get("specOverrides")
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) and VARIABLE_NAME.match(item)
                                                  for item in value):
            self.report("must be a list of variable names (the snake_case names the spec keys become), "
                        f"got {value!r}", "specOverrides")
            return ()
        return tuple(value)

    def _triggers(self) -> tuple[Trigger, ...]:
        value = self.data.get("triggers")
        if value is None:
            return ()
        if not isinstance(value, list):
            self.report(f"must be a list of {{group, version, kind, match}}, got {type_name(value)}", "triggers")
            return ()
        found: list[Trigger] = []
        for position, item in enumerate(value):
            path = ("triggers", f"[{position}]")
            if not isinstance(item, dict):
                self.report(f"must be a mapping with group, version, kind and match, got {type_name(item)}", *path)
                continue
            self._check_keys(item, TRIGGER_KEYS, path)
            gvk = self._gvk(item, path)
            match = item.get("match")
            if not isinstance(match, dict) or not match:
                self.report("match must map fields of the related object to fields of the resource, "
                            "e.g. {metadata.name: spec.name}", *path, "match")
                continue
            pairs = []
            for related, own in match.items():
                if not (isinstance(related, str) and isinstance(own, str)
                        and FIELD_PATH.match(related) and FIELD_PATH.match(own)):
                    self.report(f"invalid field paths {related!r}: {own!r}; use dotted paths such as "
                                "metadata.name: spec.name", *path, "match")
                    continue
                pairs.append((related, own))
            found.append(Trigger(gvk=gvk, match=tuple(pairs)))
        return tuple(found)

    def _playbook_or_role(
        self, mapping: Mapping[str, Any], path: tuple[str, ...]
    ) -> tuple[Path | None, Path | None]:
        playbook = self._string(mapping, "playbook", path, default="")
        role = self._string(mapping, "role", path, default="")
        if playbook and role:
            self.report("set either playbook or role, not both (the Operator SDK would silently use the "
                        "playbook); remove one of them", *path)
            return None, None
        if mapping.get("playbook") == "" or mapping.get("role") == "":
            empty = "playbook" if mapping.get("playbook") == "" else "role"
            self.report("must not be empty: give a path", *path, empty)
        if playbook:
            return self._playbook(playbook, path), None
        if role:
            return None, self._role(role, path)
        return None, None

    def _escapes(self, value: str, path: tuple[str, ...], key: str) -> bool:
        """Report (and return True) when a relative ``value`` leaves the project directory through ``..``."""
        if not leaves_directory(value):
            return False
        self.report(f"{value!r} leaves the project directory {self.base_dir} (the watches file's directory) "
                    "through \"..\"; keep playbooks, roles and charts inside the project, or give an absolute "
                    "path (such as /opt/ansible/playbooks/site.yml in an image)", *path, key)
        return True

    def _playbook(self, playbook: str, path: tuple[str, ...]) -> Path | None:
        if self._escapes(playbook, path, "playbook"):
            return None
        resolved = self.base_dir / Path(playbook).expanduser()
        if not resolved.is_file():
            self.report(f"playbook file not found: {resolved} (relative paths are resolved against the "
                        f"watches file's directory {self.base_dir}); fix the path or create the playbook",
                        *path, "playbook")
            return None
        return resolved

    def _role(self, role: str, path: tuple[str, ...]) -> Path | None:
        if self._escapes(role, path, "role"):
            return None
        candidates = role_candidates(role, self.base_dir, self.env)
        for candidate in candidates:
            if candidate.is_dir():
                return candidate
        tried = ", ".join(str(candidate) for candidate in candidates)
        self.report(f"role {role!r} was not found; looked in: {tried}. Create the role there, or set "
                    "ANSIBLE_ROLES_PATH / ANSIBLE_COLLECTIONS_PATH", *path, "role")
        return None

    def _finalizer(self) -> Finalizer | None:
        value = self.data.get("finalizer")
        if value is None:
            return None
        path = ("finalizer",)
        if not isinstance(value, dict):
            self.report(f"must be a mapping with name and playbook, role or vars, got {type_name(value)}",
                        *path)
            return None
        self._check_keys(value, FINALIZER_KEYS, path)
        name = self._string(value, "name", path, default="")
        if not name:
            self.report("a finalizer needs a name, such as cache.example.com/finalizer", *path, "name")
        elif not _is_qualified_name(name):
            self.report(f"invalid finalizer name {name!r}: use a qualified name such as "
                        "cache.example.com/finalizer", *path, "name")
        playbook, role = self._playbook_or_role(value, path)
        variables = self._vars(value, path)
        if not value.get("playbook") and not value.get("role") and not variables:
            self.report("a finalizer needs a playbook, a role or vars (vars re-run the main playbook/role "
                        "with them)", *path)
        return Finalizer(name=name, playbook=playbook, role=role, vars=variables)

    def _blacklist(self) -> tuple[GroupVersionKind, ...]:
        value = self.data.get("blacklist")
        if value is None:
            return ()
        if not isinstance(value, list):
            self.report(f"must be a list of {{group, version, kind}}, got {type_name(value)}", "blacklist")
            return ()
        items: list[GroupVersionKind] = []
        for position, item in enumerate(value):
            path = ("blacklist", f"[{position}]")
            if not isinstance(item, dict):
                self.report(f"must be a mapping with group, version and kind, got {type_name(item)}", *path)
                continue
            self._check_keys(item, GVK_KEYS, path)
            items.append(self._gvk(item, path))
        return tuple(items)

    # -- selectors ---------------------------------------------------------------------------
    def _selector(self) -> LabelSelector:
        value = self.data.get("selector")
        if value is None:
            return LabelSelector()
        if not isinstance(value, dict):
            self.report("must be a mapping with matchLabels and/or matchExpressions, "
                        f"got {type_name(value)}", "selector")
            return LabelSelector()
        self._check_keys(value, SELECTOR_KEYS, ("selector",))
        return LabelSelector(self._match_labels(value.get("matchLabels")),
                             self._match_expressions(value.get("matchExpressions")))

    def _match_labels(self, value: Any) -> dict[str, str]:
        path = ("selector", "matchLabels")
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.report(f"must be a mapping of label keys to values, got {type_name(value)}", *path)
            return {}
        labels: dict[str, str] = {}
        for key, label in value.items():
            if not isinstance(key, str) or not _is_qualified_name(key):
                self.report(f"invalid label key {key!r}: use a name such as app or example.com/tier", *path)
            elif not isinstance(label, str) or not _is_label_value(label):
                self.report(f"invalid value {label!r} for label {key!r}: label values are strings of at most "
                            "63 letters, digits, '-', '_' or '.' (quote numbers and booleans)", *path, key)
            else:
                labels[key] = label
        return labels

    def _match_expressions(self, value: Any) -> tuple[LabelSelectorRequirement, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.report(f"must be a list of {{key, operator, values}}, got {type_name(value)}",
                        "selector", "matchExpressions")
            return ()
        requirements: list[LabelSelectorRequirement] = []
        for position, item in enumerate(value):
            requirement = self._requirement(item, ("selector", "matchExpressions", f"[{position}]"))
            if requirement is not None:
                requirements.append(requirement)
        return tuple(requirements)

    def _requirement(self, item: Any, path: tuple[str, ...]) -> LabelSelectorRequirement | None:
        if not isinstance(item, dict):
            self.report(f"must be a mapping with key, operator and values, got {type_name(item)}", *path)
            return None
        self._check_keys(item, REQUIREMENT_KEYS, path)
        key, operator, values = item.get("key"), item.get("operator"), item.get("values")
        if not isinstance(key, str) or not _is_qualified_name(key):
            self.report(f"invalid label key {key!r}: use a name such as app or example.com/tier",
                        *path, "key")
            return None
        if operator not in SELECTOR_OPERATORS:
            self.report(f"invalid operator {operator!r}: use one of {', '.join(SELECTOR_OPERATORS)}",
                        *path, "operator")
            return None
        values = [] if values is None else values
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            self.report("must be a list of strings (quote numbers and booleans)", *path, "values")
            return None
        if operator in ("In", "NotIn") and not values:
            self.report(f"operator {operator} needs at least one value", *path, "values")
            return None
        if operator in ("Exists", "DoesNotExist") and values:
            self.report(f"operator {operator} takes no values; remove them", *path, "values")
            return None
        return LabelSelectorRequirement(key, operator, tuple(values))

    # -- Helm --------------------------------------------------------------------------------
    def _helm(self, gvk: GroupVersionKind) -> HelmWatch | None:
        self._check_keys(self.data, HELM_KEYS, ())
        chart = self._chart()
        option = self._string(self.data, "dryRunOption", (), default="")
        if option not in DRY_RUN_OPTIONS:
            self.report(f"invalid dryRunOption {option!r}: use \"client\" (the default) or \"server\" "
                        "(lets templates call lookup)", "dryRunOption")
        watch = HelmWatch(
            gvk=gvk,
            chart=chart or Path(),
            override_values=self._override_values(),
            reconcile_period=self._duration(),
            watch_dependent_resources=self._bool("watchDependentResources", True),
            max_concurrent_reconciles=self._int("maxConcurrentReconciles", minimum=1),
            selector=self._selector(),
            dry_run_option="server" if DRY_RUN_OPTIONS.get(option) == "server" else "client",
            allow_cross_namespace=self._bool("allowCrossNamespace", False),
        )
        return watch if chart is not None else None

    def _chart(self) -> Path | None:
        chart = self._string(self.data, "chart", (), default="")
        if not chart:
            if self.data.get("chart") in (None, ""):
                self.report("must not be empty: give the path of a chart directory or .tgz", "chart")
            return None
        if self._escapes(chart, (), "chart"):
            return None
        resolved = self.base_dir / Path(chart).expanduser()
        problem = chart_problem(resolved)
        if problem is not None:
            self.report(f"{problem} (relative paths are resolved against the watches file's directory "
                        f"{self.base_dir})", "chart")
            return None
        return resolved

    def _override_values(self) -> dict[str, str]:
        value = self.data.get("overrideValues")
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.report(f"must be a mapping of value paths to strings, got {type_name(value)}",
                        "overrideValues")
            return {}
        overrides: dict[str, str] = {}
        for key, item in value.items():
            if not isinstance(key, str) or not _STRVALS_PATH.fullmatch(key):
                self.report(f"invalid value path {key!r}: use dotted paths such as image.tag or "
                            "ingress.hosts[0].host", "overrideValues")
            elif not isinstance(item, str):
                self.report(f"value of {key!r} must be a string, got {type_name(item)} {item!r}; quote it",
                            "overrideValues")
            elif "{{" in item:
                self.report(f"value of {key!r} uses a Go template ({{{{ ... }}}}), which is not supported; "
                            "compute the value outside and pass it through an environment variable",
                            "overrideValues")
            else:
                overrides[key] = expand_env_or_empty(item, self.env)
        return overrides


def _is_qualified_name(value: str) -> bool:
    prefix, _, name = value.rpartition("/")
    if "/" in prefix or (value.count("/") == 1 and not prefix):
        return False
    if prefix and (len(prefix) > 253 or not _GROUP.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.fullmatch(name))


def _is_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_NAME.fullmatch(value))


def leaves_directory(value: str) -> bool:
    """True when the relative path ``value`` climbs out of the directory it is resolved against (``..``).

    Absolute paths (``/opt/ansible/...``, ``~/...``) and plain role names are the author's choice and
    never count; symbolic links are not followed (the project's tree is the author's too).
    """
    if not value or Path(value).expanduser().is_absolute():
        return False
    normalized = os.path.normpath(value)
    return normalized == ".." or normalized.startswith("../")


def type_name(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "nothing"}
    return names.get(type(value), type(value).__name__)
