"""``hybrid-operator check``: the watches file, the automation it names, and what a spec may not set.

Apart from :mod:`.commands` because what ``check`` says about each entry (the variables its automation
sets itself, the schema properties that collide with them) is a concern of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind


def run(watches_file: Path, environ: dict[str, str]) -> int:
    """Validate ``watches_file`` and the automation it references; print what each entry runs."""
    from hybrid_operator import errors
    from hybrid_operator.config import automation, model, watches

    try:
        loaded = watches.load(watches_file, environ)
    except errors.ConfigurationError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    problems = automation.check(loaded, watches_file.absolute().parent, environ)
    if problems:
        print(f"{watches_file}: {len(problems)} problem(s) in the automation it references:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    base_dir = watches_file.absolute().parent
    for watch in loaded:
        if isinstance(watch, model.AnsibleWatch):
            target = f"playbook {watch.playbook}" if watch.playbook else f"role {watch.role}"
        else:
            target = f"chart {watch.chart}"
        print(f"{watch.gvk}: {watch.runner} {target}")
        if isinstance(watch, model.AnsibleWatch):
            _print_own_variables(watch, base_dir, environ)
    print(f"{watches_file}: {len(loaded)} valid {'entry' if len(loaded) == 1 else 'entries'}")
    return 0


def _print_own_variables(watch: AnsibleWatch, base_dir: Path, environ: dict[str, str]) -> None:
    """What ``check`` says of the variables a watch's automation sets itself (docs/security.md): the
    names a spec key may not become, and -- a warning -- the kind's schema properties that become one."""
    from hybrid_operator.ansible.extravars import to_snake
    from hybrid_operator.config import automation

    own = automation.own_variables(watch, base_dir, environ)
    if own:
        print(f"  sets {len(own)} variable(s) itself; a resource whose spec key becomes one is refused: "
              f"{', '.join(own)}")
    if watch.spec_overrides:
        print(f"  a spec may override (specOverrides): {', '.join(watch.spec_overrides)}")
    source, properties = _schema_spec_properties(base_dir, watch.gvk)
    for key in properties:
        variable = to_snake(key) if watch.snake_case_parameters else key
        if variable in own:
            becomes = f' becomes "{variable}", which' if variable != key else ""
            print(f"  warning: {source}: spec property {key}{becomes} the automation sets itself ({own[variable]}): "
                  "every resource that sets it will be refused; make the variable a role default, or list it in "
                  "the entry's specOverrides if the spec is meant to override it", file=sys.stderr)


def _schema_spec_properties(base_dir: Path, gvk: GroupVersionKind) -> tuple[str, list[str]]:
    """Where the kind's schema is and its top-level ``spec`` properties: ``schemas/<kind>.yaml``, else a
    CRD manifest under ``config/crd/`` (the Operator SDK's layout); none without one, or a bad one."""
    import yaml

    from hybrid_operator.authoring.generate import load_schema
    from hybrid_operator.errors import ConfigurationError

    try:
        schema = load_schema(base_dir, gvk.kind)
    except ConfigurationError:
        schema = None  # ``generate`` reports it
    if schema is not None and schema.open_api:
        return schema.source, _spec_properties(schema.open_api)
    for path in sorted((base_dir / "config" / "crd").rglob("*.y*ml")):
        try:
            documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        for document in documents:
            spec = document.get("spec") if isinstance(document, dict) else None
            if not isinstance(spec, dict) or document.get("kind") != "CustomResourceDefinition" \
                    or spec.get("group") != gvk.group or (spec.get("names") or {}).get("kind") != gvk.kind:
                continue
            for version in spec.get("versions") or []:
                if isinstance(version, dict) and version.get("name") == gvk.version:
                    open_api = (version.get("schema") or {}).get("openAPIV3Schema")
                    return str(path.relative_to(base_dir)), _spec_properties(open_api)
    return "", []


def _spec_properties(open_api: Any) -> list[str]:
    properties = open_api.get("properties") if isinstance(open_api, dict) else None
    spec = properties.get("spec") if isinstance(properties, dict) else None
    found = spec.get("properties") if isinstance(spec, dict) else None
    return [key for key in found if isinstance(key, str)] if isinstance(found, dict) else []
