"""``hybrid-operator init`` and ``create api``: new operator projects and new kinds in them.

``init`` lays out a project like this repository (watches.yaml, playbooks/, roles/, charts/,
schemas/, config/, molecule/, Dockerfile, Makefile, and requirements that install hybrid-operator
from where the running one came from, see :mod:`origin`) and never overwrites a file. ``create api``
adds one kind: its watches entry, a role, playbook or chart, a sample CR, a molecule scenario, then
regenerates ``config/`` (CRD and RBAC) with :mod:`generate`.
Every input is checked before anything is written, so a refused request leaves the tree untouched;
a kind that already exists is refused, and files that already exist (a role written by hand) are kept.
"""

from __future__ import annotations

import re
import shutil
import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from hybrid_operator import __version__
from hybrid_operator.authoring import generate, origin, project
from hybrid_operator.config import locations, manifest_yaml, model
from hybrid_operator.errors import ConfigurationError

Flavor = Literal["role", "playbook", "chart"]
MOLECULE_VERSION = "26.10.0"
SHARED_MOLECULE = ("create.yml", "prepare.yml", "converge.yml", "verify.yml", "cleanup.yml", "destroy.yml")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")
_VERSION = re.compile(r"v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?")
_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")


def template(path: str, values: Mapping[str, str] | None = None) -> str:
    """A file of the package's ``templates/``, with ``${name}`` placeholders filled in from ``values``."""
    text = (resources.files("hybrid_operator.authoring") / "templates" / path).read_text(encoding="utf-8")
    return text if values is None else string.Template(text).substitute(values)


def _write_new(root: Path, files: Mapping[str, str]) -> list[str]:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return [f"wrote {relative}" for relative in files]


# -- init ---------------------------------------------------------------------------------------------


def molecule_shared_files() -> dict[str, str]:
    return {f"molecule/shared/{name}": template(f"molecule/{name}") for name in SHARED_MOLECULE}


def project_files(config: project.ProjectConfig, installs: origin.Origin | None = None) -> dict[str, str]:
    """Every file ``init`` writes, by path relative to the project directory.

    ``installs`` is where the project's ``make setup`` installs hybrid-operator from (default: where
    the running one came from, :func:`origin.current`).
    """
    installs = installs or origin.current()
    constraints = (f"# the dependencies pinned as in that checkout\n-c {installs.constraints}\n"
                   if installs.constraints else "")
    values = {"name": config.name, "version": __version__, "molecule_version": MOLECULE_VERSION,
              "origin": installs.description, "requirement": installs.requirement, "constraints": constraints}
    files = {"PROJECT": config.to_text()}
    for source, target in (("watches.yaml", "watches.yaml"), ("Dockerfile", "Dockerfile"),
                           ("Makefile", "Makefile"), ("README.md", "README.md"), ("gitignore", ".gitignore"),
                           ("requirements.txt", "requirements.txt"),
                           ("requirements-dev.txt", "requirements-dev.txt")):
        files[target] = template(f"project/{source}", values)
    for folder in ("playbooks", "roles", "charts", "schemas", "config/crd", "config/samples"):
        files[f"{folder}/.gitkeep"] = ""
    files.update({f"config/{path}": text for path, text in generate.config_files(config).items()})
    files.update(molecule_shared_files())
    return files


def init(directory: Path, domain: str = "") -> list[str]:
    """Create a project in ``directory`` (created if needed); refuse if any of its files exists."""
    if domain and not _SUBDOMAIN.fullmatch(domain):
        raise ConfigurationError(f"invalid --domain {domain!r}: use a DNS subdomain such as example.com "
                                 "(lowercase letters, digits, '-' and '.')")
    if directory.exists() and not directory.is_dir():
        raise ConfigurationError(f"{directory} exists and is not a directory")
    config = project.ProjectConfig(name=project.project_name_for(directory), domain=domain)
    files = project_files(config)
    existing = sorted(relative for relative in files if (directory / relative).exists())
    if existing:
        raise ConfigurationError(f"{directory} already has {', '.join(existing)}; init never overwrites files "
                                 "(use an empty directory)")
    return _write_new(directory, files)


# -- create api -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiRequest:
    """What ``create api`` was asked for; ``chart`` is the ``--helm-chart`` path (None: new chart)."""

    group: str
    version: str
    kind: str
    flavor: Flavor
    chart: Path | None = None


@dataclass(frozen=True)
class _Api:
    """A validated request with its derived names."""

    gvk: model.GroupVersionKind
    flavor: Flavor
    chart_source: Path | None

    @property
    def lower(self) -> str:
        return self.gvk.kind.lower()

    @property
    def sample_name(self) -> str:
        return f"{self.lower}-sample"

    @property
    def sample_file(self) -> str:
        return f"config/samples/{project.sample_file_name(self.gvk.group, self.gvk.version, self.gvk.kind)}"


def _validate(root: Path, request: ApiRequest, config: project.ProjectConfig) -> _Api:
    if not (root / "watches.yaml").is_file():
        raise ConfigurationError(f"{root / 'watches.yaml'} not found: run `hybrid-operator init` first, or run "
                                 "create api in the project directory (--project-dir)")
    if not _KIND.fullmatch(request.kind):
        raise ConfigurationError(f"invalid --kind {request.kind!r}: use CamelCase starting with an uppercase "
                                 "letter, letters and digits only (e.g. Memcached)")
    if not _VERSION.fullmatch(request.version):
        raise ConfigurationError(f"invalid --version {request.version!r}: use a Kubernetes API version such as "
                                 "v1, v1alpha1 or v2beta3")
    if not _SUBDOMAIN.fullmatch(request.group) or len(request.group) > 253:
        raise ConfigurationError(f"invalid --group {request.group!r}: use lowercase letters, digits, '-' "
                                 "(and '.'), e.g. cache")
    group = f"{request.group}.{config.domain}" if config.domain else request.group
    if "." not in group:
        raise ConfigurationError(f"group {group!r} has no domain: pass a fully qualified --group "
                                 "(cache.example.com) or set domain in PROJECT (init --domain)")
    _check_not_watched(root, request.kind)
    chart_source = None
    if request.flavor == "chart" and request.chart is not None:
        chart_source = request.chart.expanduser().resolve()
        problem = locations.chart_problem(chart_source)
        if problem is not None:
            raise ConfigurationError(f"--helm-chart: {problem}")
    return _Api(model.GroupVersionKind(group, request.version, request.kind), request.flavor, chart_source)


def _check_not_watched(root: Path, kind: str) -> None:
    path = root / "watches.yaml"
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{path}: not valid YAML: {exc}") from exc
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and str(entry.get("kind", "")).lower() == kind.lower():
            raise ConfigurationError(f"kind {kind} already exists in {path} ({entry.get('group')}/"
                                     f"{entry.get('version')} {entry.get('kind')}); nothing was changed")


def _chart_name(chart: Path) -> str:
    if chart.is_dir():
        data = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8")) or {}
        return str(data.get("name") or chart.name)
    return chart.name


def _chart_target(root: Path, api: _Api) -> str:
    """The chart's path relative to the project, for watches.yaml."""
    if api.chart_source is None:
        return f"charts/{api.lower}"
    if api.chart_source.is_relative_to(root.resolve()):
        return str(api.chart_source.relative_to(root.resolve()))
    return f"charts/{_chart_name(api.chart_source)}"


def _watches_entry(api: _Api, chart: str) -> str:
    gvk = api.gvk
    lines = [f"- group: {gvk.group}", f"  version: {gvk.version}", f"  kind: {gvk.kind}"]
    lines.append({"role": f"  role: {api.lower}", "playbook": f"  playbook: playbooks/{api.lower}.yml",
                  "chart": f"  chart: {chart}"}[api.flavor])
    return "\n".join(lines) + "\n"


def _automation_files(api: _Api, config: project.ProjectConfig) -> dict[str, str]:
    values = {"kind": api.gvk.kind, "lower": api.lower, "api_version": api.gvk.api_version,
              "project": config.name}
    if api.flavor == "role":
        return {f"roles/{api.lower}/{path}": template(f"role/{path}", values)
                for path in ("tasks/main.yml", "defaults/main.yml", "meta/main.yml")}
    if api.flavor == "playbook":
        return {f"playbooks/{api.lower}.yml": template("playbook/playbook.yml", values)}
    if api.chart_source is None:
        return {f"charts/{api.lower}/{path}": template(f"chart/{path}", values)
                for path in ("Chart.yaml", "values.yaml", "templates/_helpers.tpl", "templates/deployment.yaml",
                             "templates/service.yaml")}
    return {}


def _sample_spec(api: _Api) -> dict[str, Any]:
    """A role/playbook sample sets ``message``; a chart sample copies the chart's default values."""
    if api.flavor != "chart":
        return {"message": f"Hello from {api.sample_name}"}
    if api.chart_source is None:
        return {"replicaCount": 1}
    values_file = api.chart_source / "values.yaml"
    try:
        values = yaml.safe_load(values_file.read_text(encoding="utf-8")) if values_file.is_file() else None
    except (OSError, yaml.YAMLError):
        values = None
    return values if isinstance(values, dict) else {}


def _sample(api: _Api) -> str:
    document = {"apiVersion": api.gvk.api_version, "kind": api.gvk.kind, "metadata": {"name": api.sample_name},
                "spec": _sample_spec(api)}
    return manifest_yaml.dump(document)


def _expected_objects(api: _Api) -> list[dict[str, str]]:
    if api.flavor in ("role", "playbook"):
        return [{"api_version": "v1", "kind": "ConfigMap", "name": f"{api.sample_name}-{api.lower}"}]
    if api.chart_source is None:
        return [{"api_version": "apps/v1", "kind": "Deployment", "name": api.sample_name},
                {"api_version": "v1", "kind": "Service", "name": api.sample_name}]
    return []


def molecule_scenario(kind: str, sample_file: str, condition: str, expected: list[dict[str, str]]) -> str:
    """``molecule/<kind>/molecule.yml`` for a kind (the playbooks are shared in ``molecule/shared``)."""
    listing = manifest_yaml.dump(expected).rstrip("\n") if expected else "[]"
    if not expected:
        listing = "[]  # fill in: [{api_version: v1, kind: Service, name: <sample>-...}]"
    indented = "\n".join(f"          {line}" for line in listing.splitlines())
    values = {"kind": kind, "scenario": kind.lower(), "sample_file": sample_file, "condition": condition,
              "expected": indented}
    return template("molecule/scenario.yml", values)


def create_api(root: Path, request: ApiRequest) -> list[str]:
    """Add a kind to the project at ``root``; returns what was written. Refuses before writing anything."""
    config = project.load_config(root)
    api = _validate(root, request, config)
    chart = _chart_target(root, api)
    if api.flavor == "chart" and api.chart_source is None and (root / chart).exists():
        raise ConfigurationError(f"{chart} already exists: use --helm-chart {chart} to use it")
    if api.chart_source is not None and not api.chart_source.is_relative_to(root.resolve()) \
            and (root / chart).exists():
        raise ConfigurationError(f"{chart} already exists: remove it, or pass --helm-chart {chart}")
    files = _automation_files(api, config)
    files[api.sample_file] = _sample(api)
    condition = "Deployed" if api.flavor == "chart" else "Successful"
    files[f"molecule/{api.lower}/molecule.yml"] = molecule_scenario(api.gvk.kind, api.sample_file, condition,
                                                                    _expected_objects(api))
    shared = {rel: text for rel, text in molecule_shared_files().items() if not (root / rel).exists()}
    report = [f"kept {relative} (exists)" for relative in files if (root / relative).exists()]
    files.update(shared)
    report += _write_new(root, {rel: text for rel, text in files.items() if not (root / rel).exists()})
    if api.chart_source is not None and not api.chart_source.is_relative_to(root.resolve()):
        _copy_chart(api.chart_source, root / chart)
        report.append(f"copied {api.chart_source} to {chart}")
    _append_watch(root / "watches.yaml", _watches_entry(api, chart))
    report.append(f"added {api.gvk} to watches.yaml")
    return report + [f"{line} (config/)" for line in generate.run(root, "all")]


def _copy_chart(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)


def _append_watch(path: Path, entry: str) -> None:
    text = path.read_text(encoding="utf-8")
    separator = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    path.write_text(text + separator + entry, encoding="utf-8")
