"""Where the automation a watch names lives on disk: roles on the roles/collections path, charts.

The same resolution is used to validate ``watches.yaml`` before start-up and by the authoring tools,
so a role that ``check`` finds is the role a run uses.
"""

from __future__ import annotations

import tarfile
from collections.abc import Mapping
from pathlib import Path

from hybrid_operator.config.model import DEFAULT_COLLECTIONS_PATH


def role_candidates(role: str, base_dir: Path, env: Mapping[str, str]) -> list[Path]:
    """Where a ``role`` reference may live, in the order the first existing one wins (module docstring)."""
    if Path(role).is_absolute():
        return [Path(role)]
    candidates: list[Path] = []
    parts = role.split(".")
    if len(parts) == 3:
        collections = env.get("ANSIBLE_COLLECTIONS_PATH") or DEFAULT_COLLECTIONS_PATH
        for parent in _search_path(collections, base_dir, env):
            candidates.append(parent / "ansible_collections" / parts[0] / parts[1] / "roles" / parts[2])
    for parent in _search_path(env.get("ANSIBLE_ROLES_PATH", ""), base_dir, env):
        candidates += [parent / role, parent / "roles" / role]
    candidates.append(base_dir / "roles" / role)
    return candidates


def chart_problem(chart: Path) -> str | None:
    """Why ``chart`` is not a usable chart directory or ``.tgz`` archive, or None if it is."""
    if chart.is_dir():
        if not (chart / "Chart.yaml").is_file():
            return f"{chart} is a directory without Chart.yaml; point chart at a Helm chart directory"
        return None
    if not chart.exists():
        return f"chart not found: {chart}; fix the path or create the chart (helm create)"
    if not chart.name.endswith((".tgz", ".tar.gz")):
        return f"{chart} is a file but not a .tgz chart archive; point chart at a chart directory or .tgz"
    try:
        with tarfile.open(chart, "r:gz") as archive:
            names = archive.getnames()
    except (tarfile.TarError, OSError, EOFError) as error:
        return f"{chart} is not a readable .tgz archive ({error}); re-create it with helm package"
    if not any(name.count("/") == 1 and name.endswith("/Chart.yaml") for name in names):
        return f"{chart} has no <chart>/Chart.yaml inside; re-create it with helm package"
    return None


def _search_path(value: str, base_dir: Path, env: Mapping[str, str]) -> list[Path]:
    home = env.get("HOME") or str(Path.home())
    parents = []
    for entry in value.split(":"):
        if not entry:
            continue
        expanded = home + entry[1:] if entry == "~" or entry.startswith("~/") else entry
        parents.append(base_dir / expanded)
    return parents
