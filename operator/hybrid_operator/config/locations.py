"""Where the automation a watch names lives on disk: roles on the roles/collections path, charts.

The same resolution is used to validate ``watches.yaml`` before start-up, by ``check``, by the
authoring tools and by every run, so a role that ``check`` finds is the role a run uses.

The roles path of every run (:func:`roles_search_path`), in this order:

1. the entries of ``ANSIBLE_ROLES_PATH`` (``--ansible-roles-path`` sets it, and wins, as in the SDK);
   when it is unset, the ``roles_path`` of the ``ansible.cfg`` Ansible would read
   (``ANSIBLE_CONFIG``, ``./ansible.cfg``, ``~/.ansible.cfg``, ``/etc/ansible/ansible.cfg``), else
   Ansible's default (``~/.ansible/roles:/usr/share/ansible/roles:/etc/ansible/roles``);
2. ``<watches file's directory>/roles``;
3. ``<cwd>/roles``, when the working directory is another one: the SDK's flag help says "if unset,
   roles are assumed to be in {{CWD}}/roles", and its image's ``ansible.cfg`` has
   ``roles_path = /opt/ansible/roles``, its working directory.

Ansible itself looks in ``roles/`` next to the playbook, and next to it, before any of these; a
role run also gets the role's own parent directory first.
"""

from __future__ import annotations

import configparser
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path

from hybrid_operator.config.model import DEFAULT_COLLECTIONS_PATH

#: Ansible's own default ``roles_path`` (``DEFAULT_ROLES_PATH`` in ansible-core's base.yml)
DEFAULT_ROLES_PATH = "~/.ansible/roles:/usr/share/ansible/roles:/etc/ansible/roles"


def role_candidates(role: str, base_dir: Path, env: Mapping[str, str], cwd: Path | None = None) -> list[Path]:
    """Where a ``role`` reference may live, in the order the first existing one wins (module docstring).

    The Operator SDK's order: absolute path; ``ns.coll.role`` in each collections path entry; each
    ``ANSIBLE_ROLES_PATH`` entry (``<p>/<role>``, ``<p>/roles/<role>``); ``roles/<role>`` in the
    working directory -- here also next to the watches file (``base_dir``), first.
    """
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
    for directory in _project_dirs(base_dir, cwd):
        candidates.append(directory / "roles" / role)
    return candidates


def roles_search_path(base_dir: Path, env: Mapping[str, str], cwd: Path | None = None) -> list[Path]:
    """The ``ANSIBLE_ROLES_PATH`` of every run, as absolute directories (see the module docstring).

    ``base_dir`` is the watches file's directory (where relative entries are resolved, and where runs
    start ``ansible-playbook``), ``cwd`` the operator's working directory (default: the current one).
    """
    configured = env.get("ANSIBLE_ROLES_PATH")
    if configured is None:
        configured = ansible_cfg_value("roles_path", base_dir, env) or DEFAULT_ROLES_PATH
    found: list[Path] = []
    for entry in [*_search_path(configured, base_dir, env),
                  *(directory / "roles" for directory in _project_dirs(base_dir, cwd))]:
        if entry not in found:
            found.append(entry)
    return found


def collections_search_path(base_dir: Path, env: Mapping[str, str]) -> list[Path]:
    """The collections path a run resolves ``ns.collection`` names on (``ANSIBLE_COLLECTIONS_PATH``, else
    ``ansible.cfg``'s ``collections_path``, else Ansible's default)."""
    configured = env.get("ANSIBLE_COLLECTIONS_PATH") or env.get("ANSIBLE_COLLECTIONS_PATHS") \
        or ansible_cfg_value("collections_path", base_dir, env) \
        or ansible_cfg_value("collections_paths", base_dir, env) or DEFAULT_COLLECTIONS_PATH
    return _search_path(configured, base_dir, env)


def ansible_cfg_file(base_dir: Path, env: Mapping[str, str]) -> Path | None:
    """The ``ansible.cfg`` a run started in ``base_dir`` reads, as Ansible picks it (the first that exists)."""
    home = env.get("HOME") or str(Path.home())
    candidates = [env["ANSIBLE_CONFIG"]] if env.get("ANSIBLE_CONFIG") else []
    candidates += [str(base_dir / "ansible.cfg"), os.path.join(home, ".ansible.cfg"), "/etc/ansible/ansible.cfg"]
    for candidate in candidates:
        path = Path(os.path.expanduser(candidate))
        if path.is_dir():
            path = path / "ansible.cfg"
        if path.is_file():
            return path
    return None


def ansible_cfg_value(key: str, base_dir: Path, env: Mapping[str, str]) -> str | None:
    """A ``[defaults]`` value of that ``ansible.cfg``; None when unset or unreadable."""
    path = ansible_cfg_file(base_dir, env)
    if path is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    value = parser.get("defaults", key, fallback=None)
    return value.strip() if value and value.strip() else None


def _project_dirs(base_dir: Path, cwd: Path | None) -> list[Path]:
    """The watches file's directory, then the working directory when it is another one."""
    working = (cwd or Path.cwd()).absolute()
    base = base_dir.absolute()
    return [base] if working == base else [base, working]


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
    for entry in value.split(os.pathsep):
        entry = entry.strip()
        if not entry:
            continue
        expanded = home + entry[1:] if entry == "~" or entry.startswith("~/") else entry
        parents.append(base_dir / expanded)
    return parents
