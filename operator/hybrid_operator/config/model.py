"""The ``watches.yaml`` model: frozen, validated descriptions of what each watched kind runs.

:func:`hybrid_operator.config.watches.load` produces these; everything downstream (controllers,
reconcilers, runners, generators) reads them and never the YAML. The tagged union :data:`Watch` is
:class:`AnsibleWatch` (a playbook or role, the SDK's Ansible format) or :class:`HelmWatch` (a chart,
the SDK's Helm format).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

DEFAULT_MAX_RUNNER_ARTIFACTS = 20
DEFAULT_COLLECTIONS_PATH = "/usr/share/ansible/collections:~/.ansible/collections"

_ENV_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclass(frozen=True)
class GroupVersionKind:
    """A resource type; ``group`` is ``""`` for the core group."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


@dataclass(frozen=True)
class LabelSelectorRequirement:
    """One ``matchExpressions`` item; ``values`` is empty for Exists/DoesNotExist."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True)
class LabelSelector:
    """A ``metav1.LabelSelector``; the empty selector matches everything."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with these labels is selected (all conditions must hold)."""
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        return all(requirement.matches(labels) for requirement in self.match_expressions)


@dataclass(frozen=True)
class Trigger:
    """A related kind whose changes re-enqueue the custom resources they match (our extension).

    ``match`` maps a field path of the related object (``metadata.name``, ``metadata.labels.app``)
    to a field path of the custom resource (``spec.name``); a related object matches a resource
    when every pair is equal, and (for namespaced kinds) both live in the same namespace.
    """

    gvk: GroupVersionKind
    match: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Finalizer:
    """An Ansible watch's finalizer; with neither playbook nor role the main one re-runs with ``vars``."""

    name: str
    playbook: Path | None = None
    role: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AnsibleWatch:
    """An entry run by Ansible: exactly one of ``playbook`` (a file) or ``role`` (a resolved directory).

    ``reconcile_period`` None means "use the ``--reconcile-period`` flag". ``mark_unsafe`` defaults
    to **True** in this product (the Operator SDK's default is false): CR strings are never templated.
    """

    gvk: GroupVersionKind
    playbook: Path | None = None
    role: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    reconcile_period: timedelta | None = None
    manage_status: bool = True
    watch_dependent_resources: bool = True
    watch_cluster_scoped_resources: bool = False
    max_runner_artifacts: int = DEFAULT_MAX_RUNNER_ARTIFACTS
    finalizer: Finalizer | None = None
    selector: LabelSelector = field(default_factory=LabelSelector)
    blacklist: tuple[GroupVersionKind, ...] = ()
    snake_case_parameters: bool = True
    mark_unsafe: bool = True
    watch_annotations_changes: bool = False
    triggers: tuple[Trigger, ...] = ()
    #: variables the automation sets itself that a spec key may still override (our extension; default none)
    spec_overrides: tuple[str, ...] = ()
    runner: Literal["ansible"] = field(default="ansible", init=False)


@dataclass(frozen=True)
class HelmWatch:
    """An entry run by Helm: ``chart`` is a chart directory or a ``.tgz`` archive.

    ``override_values`` maps strvals paths (``image.tag``, ``a[0].b``) to already-expanded strings;
    ``reconcile_period`` / ``max_concurrent_reconciles`` None mean "use the flag".
    """

    gvk: GroupVersionKind
    chart: Path
    override_values: dict[str, str] = field(default_factory=dict)
    reconcile_period: timedelta | None = None
    watch_dependent_resources: bool = True
    max_concurrent_reconciles: int | None = None
    selector: LabelSelector = field(default_factory=LabelSelector)
    dry_run_option: Literal["client", "server"] = "client"
    #: ``allowCrossNamespace`` (ours): a release may put namespaced objects outside its CR's namespace.
    #: False (the default): a rendered manifest that does is refused before helm applies it.
    allow_cross_namespace: bool = False
    runner: Literal["helm"] = field(default="helm", init=False)


Watch = AnsibleWatch | HelmWatch


def expand_env(text: str, env: Mapping[str, str]) -> str:
    """Replace ``$NAME`` and ``${NAME}`` with ``env[NAME]``; undefined references stay as written."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return env.get(name, match.group(0))

    return _ENV_REFERENCE.sub(replace, text)


def expand_env_or_empty(text: str, env: Mapping[str, str]) -> str:
    """Like :func:`expand_env`, but an undefined variable becomes ``""`` (Go's ``os.ExpandEnv``)."""
    return _ENV_REFERENCE.sub(lambda match: env.get(match.group(1) or match.group(2), ""), text)
