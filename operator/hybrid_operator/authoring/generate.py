"""``hybrid-operator generate crd|rbac|manager|all``: the deploy manifests in ``config/``, from the project.

``config/crd``, ``config/rbac`` and ``config/manager`` are outputs, never edited by hand: CRDs come
from ``watches.yaml`` (one per group/kind, a version per entry, the first listed stored) and, when a
kind has one, its schema file ``schemas/<kind>.yaml``; the ClusterRole comes from :mod:`rbac`'s
derivation; the Namespace, ServiceAccount, binding and Deployment from templates named after the
project. Output is deterministic (fixed key order, sorted rules, no timestamps) so that ``git diff``
after ``make manifests`` shows real changes only, and CI can compare a fresh generation with the
committed files.

A schema file is a mapping with any of: ``openAPIV3Schema`` (the version's schema), ``printerColumns``
(``additionalPrinterColumns``), ``shortNames``, ``categories``, ``plural``, ``singular``, ``scope``
(Namespaced or Cluster) and ``children`` (``[{apiVersion, kind}]``: kinds the automation manages that
RBAC derivation cannot see). Without one a kind gets an open schema. ``status`` always keeps unknown
fields, since the operator writes conditions there.
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from hybrid_operator.authoring import kinds, project, rbac
from hybrid_operator.config import manifest_yaml, model, watches
from hybrid_operator.errors import ConfigurationError

Target = Literal["crd", "rbac", "manager", "all"]
TARGETS: tuple[Target, ...] = ("crd", "rbac", "manager", "all")
SCHEMA_KEYS = frozenset({"openAPIV3Schema", "printerColumns", "shortNames", "categories", "plural", "singular",
                         "scope", "children"})
_CONFIG_TEMPLATES = {"rbac/namespace.yaml": "namespace.yaml", "rbac/service_account.yaml": "service_account.yaml",
                     "rbac/role_binding.yaml": "role_binding.yaml", "manager/manager.yaml": "manager.yaml"}


@dataclass(frozen=True)
class KindSchema:
    """A kind's schema file, read and checked (defaults: open schema, derived names)."""

    kind: str
    plural: str
    singular: str
    scope: str = "Namespaced"
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[dict[str, Any], ...] = ()
    open_api: dict[str, Any] | None = None
    children: tuple[tuple[str, str], ...] = ()
    source: str = ""


@dataclass(frozen=True)
class ApiKind:
    """One CRD to generate: a group/kind, its versions in watches order, its schema."""

    group: str
    schema: KindSchema
    versions: tuple[str, ...] = field(default_factory=tuple)
    related: tuple[tuple[str, str], ...] = ()

    @property
    def file_name(self) -> str:
        return project.crd_file_name(self.group, self.schema.plural)


def _strings(value: Any, key: str, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigurationError(f"{source}: {key} must be a list of strings")
    return tuple(value)


def _children(value: Any, source: str) -> tuple[tuple[str, str], ...]:
    found = []
    for item in value or []:
        if not isinstance(item, dict) or not isinstance(item.get("apiVersion"), str) \
                or not isinstance(item.get("kind"), str):
            raise ConfigurationError(f"{source}: each children item needs apiVersion and kind, got {item!r}")
        found.append((item["apiVersion"], item["kind"]))
    return tuple(found)


def load_schema(root: Path, kind: str) -> KindSchema:
    """``schemas/<kind>.yaml`` read and validated, or the defaults when the file does not exist."""
    path = project.schema_file(root, kind)
    default_plural = project.plural(kind)
    if not path.is_file():
        return KindSchema(kind=kind, plural=default_plural, singular=kind.lower())
    source = str(path.relative_to(root))
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"{source}: must be a mapping (keys: {', '.join(sorted(SCHEMA_KEYS))})")
    unknown = sorted(str(key) for key in data if key not in SCHEMA_KEYS)
    if unknown:
        raise ConfigurationError(f"{source}: unknown keys {', '.join(unknown)}; valid keys: "
                                 f"{', '.join(sorted(SCHEMA_KEYS))}")
    open_api = data.get("openAPIV3Schema")
    if open_api is not None and (not isinstance(open_api, dict) or open_api.get("type", "object") != "object"):
        raise ConfigurationError(f"{source}: openAPIV3Schema must be a mapping with type: object")
    columns = data.get("printerColumns") or []
    if not isinstance(columns, list) or not all(isinstance(c, dict) and {"name", "type", "jsonPath"} <= set(c)
                                                for c in columns):
        raise ConfigurationError(f"{source}: printerColumns must be a list of {{name, type, jsonPath}}")
    scope = str(data.get("scope", "Namespaced"))
    if scope not in ("Namespaced", "Cluster"):
        raise ConfigurationError(f"{source}: scope must be Namespaced or Cluster, got {scope!r}")
    return KindSchema(kind=kind, plural=str(data.get("plural") or default_plural),
                      singular=str(data.get("singular") or kind.lower()), scope=scope,
                      short_names=_strings(data.get("shortNames"), "shortNames", source),
                      categories=_strings(data.get("categories"), "categories", source),
                      printer_columns=tuple(columns), open_api=open_api,
                      children=_children(data.get("children"), source), source=source)


def open_schema(kind: str, plural: str) -> dict[str, Any]:
    """The schema of a kind without a schema file: any spec, any status."""
    return {"type": "object", "description": f"{kind} is the Schema for the {plural} API.",
            "properties": {
                "spec": {"type": "object", "description": f"Spec defines the desired state of {kind}.",
                         "x-kubernetes-preserve-unknown-fields": True},
                "status": {"type": "object", "description": f"Status defines the observed state of {kind}.",
                           "x-kubernetes-preserve-unknown-fields": True}}}


def _with_open_status(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``status`` (added if missing) keeping unknown fields (conditions, results)."""
    result = {"type": "object", **schema}
    properties = dict(result.get("properties") or {})
    status = dict(properties.get("status") or {"type": "object"})
    status["x-kubernetes-preserve-unknown-fields"] = True
    properties["status"] = status
    result["properties"] = properties
    return result


def api_kinds(root: Path, loaded: list[model.Watch]) -> list[ApiKind]:
    """The CRDs of a project's watches, in watches order (one per group/kind)."""
    grouped: dict[tuple[str, str], list[str]] = {}
    related: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for watch in loaded:
        key = (watch.gvk.group, watch.gvk.kind)
        versions = grouped.setdefault(key, [])
        if watch.gvk.version not in versions:
            versions.append(watch.gvk.version)
        triggers = watch.triggers if isinstance(watch, model.AnsibleWatch) else ()
        related.setdefault(key, []).extend((t.gvk.api_version, t.gvk.kind) for t in triggers)
    return [ApiKind(group=group, schema=load_schema(root, kind), versions=tuple(versions),
                    related=tuple(dict.fromkeys(related[(group, kind)])))
            for (group, kind), versions in grouped.items()]


def crd_document(api: ApiKind) -> dict[str, Any]:
    schema = api.schema
    names: dict[str, Any] = {"plural": schema.plural, "singular": schema.singular, "kind": schema.kind,
                             "listKind": f"{schema.kind}List"}
    if schema.short_names:
        names["shortNames"] = list(schema.short_names)
    if schema.categories:
        names["categories"] = list(schema.categories)
    open_api = _with_open_status(schema.open_api) if schema.open_api else open_schema(schema.kind, schema.plural)
    versions = []
    for index, version in enumerate(api.versions):
        entry: dict[str, Any] = {"name": version, "served": True, "storage": index == 0,
                                 "subresources": {"status": {}}}
        if schema.printer_columns:
            entry["additionalPrinterColumns"] = [dict(column) for column in schema.printer_columns]
        entry["schema"] = {"openAPIV3Schema": open_api}
        versions.append(entry)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{schema.plural}.{api.group}"},
            "spec": {"group": api.group, "scope": schema.scope, "names": names, "versions": versions}}


def _header(what: str, sources: str) -> str:
    return (f"{manifest_yaml.HEADER_MARK} (`hybrid-operator generate {what}`) from {sources}.\n"
            "Do not edit: change those and run `make manifests`.")


def crd_files(root: Path, loaded: list[model.Watch]) -> dict[str, str]:
    files = {}
    for api in api_kinds(root, loaded):
        sources = "watches.yaml" + (f" and {api.schema.source}" if api.schema.source else "")
        files[f"crd/{api.file_name}"] = manifest_yaml.with_header(_header("crd", sources), crd_document(api))
    return files


# Kubernetes resource names are the lower-cased kind, pluralized by English rules, with these exceptions.
IRREGULAR_PLURALS = {"Endpoints": "endpoints"}


def plural_of(kind: str) -> str:
    """The resource name of a built-in kind (``NetworkPolicy`` -> ``networkpolicies``)."""
    if kind in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[kind]
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def needs(root: Path, loaded: list[model.Watch]) -> list[rbac.Need]:
    """What the operator and the automation of the project at ``root`` need (see :mod:`rbac`)."""
    apis = api_kinds(root, loaded)
    own = {(api.group, api.schema.kind): api.schema.plural for api in apis}

    def resolve(api_version: str, kind: str) -> tuple[str, str] | None:
        """A kind of the project, a built-in kind (by kind, resource or singular name, as kubernetes.core
        accepts them), else the English plural of the kind."""
        group = api_version.rpartition("/")[0]
        return group, own.get((group, kind)) or kinds.lookup(group, kind).plural or plural_of(kind)

    return rbac.derive_needs(root, watched_kinds(apis), resolve)


def watched_kinds(apis: list[ApiKind]) -> list[rbac.WatchedKind]:
    return [rbac.WatchedKind(api.group, api.schema.plural, api.schema.kind, api.schema.children, api.related)
            for api in apis]


def role_text(config: project.ProjectConfig, rules: list[rbac.Rule]) -> str:
    document = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": config.name, "labels": {"app.kubernetes.io/name": config.name}}}
    header = _header("rbac", "watches.yaml, roles/, playbooks/, charts/ and schemas/") + (
        "\nWhat the operator and the automation it runs may do, cluster-wide.")
    lines = [manifest_yaml.with_header(header, document), "rules:\n"]
    for rule in rules:
        if rule.comment:
            lines.append(f"  # {rule.comment}\n")
        lines.append("".join(f"  {line}\n" for line in manifest_yaml.dump([rule.to_dict()]).splitlines()))
    return "".join(lines)


def rbac_files(root: Path, config: project.ProjectConfig, loaded: list[model.Watch]) -> dict[str, str]:
    rules = rbac.rules_for(watched_kinds(api_kinds(root, loaded)), needs(root, loaded))
    files = {"rbac/role.yaml": role_text(config, rules)}
    files.update({path: text for path, text in config_files(config).items() if path.startswith("rbac/")})
    return files


def config_files(config: project.ProjectConfig) -> dict[str, str]:
    """Namespace, ServiceAccount, ClusterRoleBinding and Deployment, named after the project."""
    values = {"name": config.name, "namespace": config.namespace, "image": f"{config.name}:latest"}
    folder = resources.files("hybrid_operator.authoring") / "templates" / "config"
    return {path: string.Template((folder / template).read_text(encoding="utf-8")).substitute(values)
            for path, template in _CONFIG_TEMPLATES.items()}


def render(root: Path, target: Target, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The files of ``target`` (paths relative to ``config/``) for the project at ``root``."""
    loaded = watches.load(root / "watches.yaml", dict(os.environ) if env is None else env)
    config = project.load_config(root)
    files: dict[str, str] = {}
    if target in ("crd", "all"):
        files.update(crd_files(root, loaded))
    if target in ("rbac", "all"):
        files.update(rbac_files(root, config, loaded))
    if target in ("manager", "all"):
        files.update({p: t for p, t in config_files(config).items() if p.startswith("manager/")})
    return dict(sorted(files.items()))


def write(files: Mapping[str, str], output: Path, target: Target) -> list[str]:
    """Write ``files`` under ``output``; remove generated CRDs no longer produced. Returns what changed."""
    changed = []
    if target in ("crd", "all") and (output / "crd").is_dir():
        for stale in sorted((output / "crd").glob("*.yaml")):
            relative = f"crd/{stale.name}"
            if relative not in files and manifest_yaml.is_generated(stale.read_text(encoding="utf-8")):
                stale.unlink()
                changed.append(f"removed {relative}")
    for relative, text in files.items():
        path = output / relative
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        changed.append(f"wrote {relative}")
    return changed


def run(root: Path, target: Target, output: Path | None = None) -> list[str]:
    """Generate ``target`` for the project at ``root`` into ``output`` (default ``root/config``)."""
    files = render(root, target)
    return write(files, output if output is not None else root / "config", target)
