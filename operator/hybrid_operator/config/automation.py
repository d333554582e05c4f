"""What ``hybrid-operator check`` finds in the automation a watches file references, without Ansible.

Why this module exists: a playbook that imports a role no run can find, or a role whose YAML does
not parse, used to pass ``check`` and fail every run. This walks what a run would load, the way
Ansible loads it, and reports each problem as ``file:line: message``:

* each playbook (a watch's, its finalizer's, and those ``import_playbook`` pulls in) and each role
  (a watch's, and every role they reference) is read as YAML; a file that does not parse is a
  problem at the line of the error;
* roles referenced by a play's ``roles:``, by ``import_role``/``include_role`` and by a role's
  ``meta/main.yml`` ``dependencies`` are resolved as Ansible does for our runs: a path; a
  ``ns.collection.role`` name on the collections path; ``roles/`` next to the playbook; the roles
  search path of every run (:func:`~hybrid_operator.config.locations.roles_search_path`: the
  configured path, the project's and the working directory's ``roles/``); next to the playbook;
  next to the referencing role; then in the play's ``collections:``. Not found is a problem at the
  reference's line;
* task files pulled in by ``import_tasks``/``include_tasks`` with a literal name are read too.

Anything templated (``{{ ... }}``) is left alone, as is everything Ansible decides at run time.
It needs no network and no cluster, and runs no Ansible.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hybrid_operator.config.locations import collections_search_path, roles_search_path
from hybrid_operator.config.model import AnsibleWatch, Watch
from hybrid_operator.config.watches import expanded_size

TASK_LISTS = ("pre_tasks", "tasks", "post_tasks", "handlers")
BLOCK_LISTS = ("block", "rescue", "always")
ROLE_ACTIONS = frozenset(f"{prefix}{action}" for prefix in ("", "ansible.builtin.", "ansible.legacy.")
                         for action in ("import_role", "include_role"))
TASK_ACTIONS = frozenset(f"{prefix}{action}" for prefix in ("", "ansible.builtin.", "ansible.legacy.")
                         for action in ("import_tasks", "include_tasks"))
ROLE_DIRS = ("tasks", "handlers", "defaults", "vars", "meta")
_YAML_SUFFIXES = (".yml", ".yaml")
#: the most YAML values one playbook, task or role file may hold once its aliases are followed
MAX_FILE_NODES = 200_000


class _Map(dict[str, Any]):
    """A YAML mapping that remembers its line (1-based)."""

    line = 0


class _List(list[Any]):
    """A YAML sequence that remembers its line (1-based)."""

    line = 0


class _LineLoader(yaml.SafeLoader):
    """PyYAML's safe loader keeping line numbers, and Ansible's tags (``!vault``, ``!unsafe``) as plain values."""


def _mapping(loader: _LineLoader, node: yaml.MappingNode) -> _Map:
    built = _Map({str(key): value for key, value in loader.construct_mapping(node, deep=True).items()})
    built.line = node.start_mark.line + 1
    return built


def _sequence(loader: _LineLoader, node: yaml.SequenceNode) -> _List:
    built = _List(loader.construct_sequence(node, deep=True))
    built.line = node.start_mark.line + 1
    return built


def _tagged(loader: _LineLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return _sequence(loader, node)
    assert isinstance(node, yaml.MappingNode)
    return _mapping(loader, node)


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)
_LineLoader.add_multi_constructor("!", _tagged)


@dataclass
class _Walk:
    """One check: where to look, what was read already, what was found wrong."""

    base_dir: Path
    env: Mapping[str, str]
    cwd: Path | None
    problems: list[str] = field(default_factory=list)
    seen: set[Path] = field(default_factory=set)

    def report(self, path: Path, line: int, message: str) -> None:
        entry = f"{path}:{line}: {message}" if line else f"{path}: {message}"
        if entry not in self.problems:
            self.problems.append(entry)

    def load(self, path: Path) -> Any:
        """A YAML file's content (None when it is unreadable or does not parse: reported)."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            self.report(path, 0, f"cannot be read: {error}")
            return None
        loader = _LineLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            size = expanded_size(node, MAX_FILE_NODES)
            if size is None or size > MAX_FILE_NODES:
                self.report(path, node.start_mark.line + 1, "YAML aliases expand this file beyond "
                            f"{MAX_FILE_NODES} values or refer to themselves; not read")
                return None
            return loader.construct_document(node)
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark or error.context_mark
            detail = " ".join(str(part) for part in (error.context, error.problem) if part)
            self.report(path, mark.line + 1 if mark else 0, f"invalid YAML: {detail}")
        except yaml.YAMLError as error:
            self.report(path, 0, f"invalid YAML: {error}")
        except RecursionError:
            self.report(path, 0, "invalid YAML: nested too deeply")
        finally:
            loader.dispose()
        return None

    # -- playbooks -----------------------------------------------------------------------------

    def playbook(self, path: Path) -> None:
        if path in self.seen:
            return
        self.seen.add(path)
        plays = self.load(path)
        if plays is None:
            return
        if not isinstance(plays, list):
            self.report(path, getattr(plays, "line", 0), "a playbook must be a list of plays")
            return
        for play in plays:
            if not isinstance(play, _Map):
                continue
            imported = play.get("import_playbook") or play.get("ansible.builtin.import_playbook")
            if isinstance(imported, str) and not _templated(imported):
                target = path.parent / imported
                if target.is_file():
                    self.playbook(target)
                else:
                    self.report(path, play.line, f"import_playbook {imported!r}: no such file {target}")
                continue
            collections = [c for c in play.get("collections") or [] if isinstance(c, str)]
            for entry in play.get("roles") or []:
                self.role_reference(entry, path, play_dir=path.parent, collections=collections)
            for key in TASK_LISTS:
                self.tasks(play.get(key), path, path.parent, path.parent, collections)

    # -- tasks ---------------------------------------------------------------------------------

    def tasks(self, tasks: Any, path: Path, play_dir: Path, tasks_dir: Path, collections: Sequence[str],
              referrer: Path | None = None) -> None:
        for task in _flatten(tasks):
            for action in ROLE_ACTIONS & task.keys():
                self.role_reference(task[action], path, play_dir=play_dir, collections=collections,
                                    referrer=referrer, line=task.line)
            for action in TASK_ACTIONS & task.keys():
                self.task_file(task[action], path, task.line, play_dir, tasks_dir, collections, referrer)

    def task_file(self, value: Any, path: Path, line: int, play_dir: Path, tasks_dir: Path,
                  collections: Sequence[str], referrer: Path | None) -> None:
        name = value.get("file") if isinstance(value, dict) else value
        if not isinstance(name, str) or _templated(name):
            return
        target = next((c for c in (tasks_dir / name, path.parent / name) if c.is_file()), None)
        if target is None:
            self.report(path, line, f"{name!r}: no such task file in {tasks_dir}")
            return
        if target in self.seen:
            return
        self.seen.add(target)
        content = self.load(target)
        if content is not None:
            self.tasks(content, target, play_dir, target.parent, collections, referrer)

    # -- roles ---------------------------------------------------------------------------------

    def role_reference(self, entry: Any, path: Path, *, play_dir: Path, collections: Sequence[str],
                       referrer: Path | None = None, line: int = 0) -> None:
        name = _role_name(entry)
        if name is None or _templated(name):
            return
        line = getattr(entry, "line", 0) or line or _line_of(path, name)
        found = self.find_role(name, play_dir, collections, referrer)
        if found is None:
            self.report(path, line, f"role {name!r} was not found; looked in: "
                        f"{', '.join(str(p) for p in self.role_places(name, play_dir, collections, referrer))}")
            return
        self.role(found, play_dir, collections)

    def role_places(self, name: str, play_dir: Path, collections: Sequence[str], referrer: Path | None) -> list[Path]:
        """Where Ansible (with our runs' roles path) looks for a role, in order."""
        if "/" in name or name.startswith(("~", ".")):
            return [play_dir / Path(name).expanduser()]
        places: list[Path] = []
        parts = name.split(".")
        if len(parts) == 3:
            places += [root / "ansible_collections" / parts[0] / parts[1] / "roles" / parts[2]
                       for root in collections_search_path(self.base_dir, self.env)]
        places.append(play_dir / "roles" / name)
        places += [directory / name for directory in roles_search_path(self.base_dir, self.env, self.cwd)]
        places.append(play_dir / name)
        if referrer is not None:
            places.append(referrer.parent / name)
        for collection in collections:
            namespace, _, short = collection.partition(".")
            places += [root / "ansible_collections" / namespace / short / "roles" / name
                       for root in collections_search_path(self.base_dir, self.env)]
        return list(dict.fromkeys(places))

    def find_role(self, name: str, play_dir: Path, collections: Sequence[str], referrer: Path | None) -> Path | None:
        return next((p for p in self.role_places(name, play_dir, collections, referrer) if p.is_dir()), None)

    def role(self, directory: Path, play_dir: Path, collections: Sequence[str] = ()) -> None:
        """Read a role's YAML files; follow its dependencies and the roles and task files it imports."""
        if directory in self.seen:
            return
        self.seen.add(directory)
        for sub in ROLE_DIRS:
            for source in _yaml_files(directory / sub):
                if source in self.seen:
                    continue
                self.seen.add(source)
                content = self.load(source)
                if content is None:
                    continue
                if sub == "meta" and source.stem == "main" and isinstance(content, dict):
                    role_collections = [c for c in content.get("collections") or [] if isinstance(c, str)]
                    for dependency in content.get("dependencies") or []:
                        self.role_reference(dependency, source, play_dir=play_dir,
                                            collections=[*collections, *role_collections], referrer=directory)
                elif sub in ("tasks", "handlers"):
                    self.tasks(content, source, play_dir, source.parent, collections, referrer=directory)


def check(watches: Sequence[Watch], base_dir: Path, env: Mapping[str, str], cwd: Path | None = None) -> list[str]:
    """Every problem of the automation ``watches`` reference (``file:line: message``); empty when none."""
    walk = _Walk(base_dir.absolute(), env, cwd)
    for watch in watches:
        if not isinstance(watch, AnsibleWatch):
            continue
        finalizer = watch.finalizer
        for playbook in (watch.playbook, finalizer.playbook if finalizer else None):
            if playbook is not None:
                walk.playbook(playbook.absolute())
        for role in (watch.role, finalizer.role if finalizer else None):
            if role is not None:
                walk.role(role.absolute(), role.absolute().parent)
    return walk.problems


def _flatten(tasks: Any) -> Iterator[_Map]:
    """Every task of a task list, blocks included."""
    if not isinstance(tasks, list):
        return
    for task in tasks:
        if not isinstance(task, _Map):
            continue
        nested = [task[key] for key in BLOCK_LISTS if isinstance(task.get(key), list)]
        if nested:
            for block in nested:
                yield from _flatten(block)
        else:
            yield task


def _role_name(entry: Any) -> str | None:
    """The role a ``roles:`` item, an ``import_role`` argument or a dependency names."""
    if isinstance(entry, str):
        match = re.search(r"(?:^|\s)name=(\S+)", entry)
        return match.group(1) if match else entry.strip() or None
    if isinstance(entry, dict):
        name = entry.get("role", entry.get("name"))
        return name if isinstance(name, str) else None
    return None


def _templated(value: str) -> bool:
    return "{{" in value or "{%" in value


def _yaml_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*") if p.is_file() and (p.suffix in _YAML_SUFFIXES or p.name == "main"))


def _line_of(path: Path, text: str) -> int:
    try:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if text in line:
                return number
    except (OSError, UnicodeDecodeError):
        pass
    return 0
