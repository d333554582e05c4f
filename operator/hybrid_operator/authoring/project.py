"""An operator project on disk: its optional ``PROJECT`` file and the naming rules of its files.

``hybrid-operator init`` writes ``PROJECT`` (the project name and the API domain); ``create api`` and
``generate`` read it. A tree without one (such as this repository) is the project
``hybrid-operator`` with no domain. The names derived from a kind -- the resource plural, the CRD and
sample file names -- follow the Operator SDK so that scaffolded trees look like the SDK's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from hybrid_operator.errors import ConfigurationError

PROJECT_FILE = "PROJECT"
DEFAULT_NAME = "hybrid-operator"
LAYOUT = "hybrid-operator/v1"

_PROJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class ProjectConfig:
    """What ``PROJECT`` records: the project's name (namespace/ServiceAccount/image) and API domain."""

    name: str = DEFAULT_NAME
    domain: str = ""

    @property
    def namespace(self) -> str:
        return f"{self.name}-system"

    def to_text(self) -> str:
        return (f"# Written by `hybrid-operator init`; read by `create api` and `generate`.\n"
                f"layout: {LAYOUT}\nprojectName: {self.name}\ndomain: {self.domain}\n")


def load_config(root: Path) -> ProjectConfig:
    """The project's ``PROJECT`` file, or the defaults when there is none."""
    path = root / PROJECT_FILE
    if not path.is_file():
        return ProjectConfig()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path}: must be a mapping with projectName and domain")
    name = str(data.get("projectName") or DEFAULT_NAME)
    if not is_project_name(name):
        raise ConfigurationError(f"{path}: projectName {name!r} must be a DNS label (lowercase, digits, '-')")
    return ProjectConfig(name=name, domain=str(data.get("domain") or ""))


def is_project_name(name: str) -> bool:
    return len(name) <= 50 and bool(_PROJECT_NAME.fullmatch(name))


def project_name_for(directory: Path) -> str:
    """A valid project name from a directory name (``My_Operator`` -> ``my-operator``)."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", directory.resolve().name.lower()).strip("-")[:50].strip("-")
    return cleaned or DEFAULT_NAME


def plural(kind: str) -> str:
    """The resource plural of a kind, as kubebuilder derives it (``Realibox`` -> ``realiboxes``)."""
    lower = kind.lower()
    if re.search(r"[^aeiou]y$", lower):
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def crd_file_name(group: str, kind_plural: str) -> str:
    return f"{group}_{kind_plural}.yaml"


def sample_file_name(group: str, version: str, kind: str) -> str:
    """``config/samples`` file of a kind: ``<first label of the group>_<version>_<kind>.yaml``."""
    return f"{group.split('.', maxsplit=1)[0]}_{version}_{kind.lower()}.yaml"


def schema_file(root: Path, kind: str) -> Path:
    """Where a kind's OpenAPI schema (and CRD extras) may be declared: ``schemas/<kind>.yaml``."""
    return root / "schemas" / f"{kind.lower()}.yaml"
