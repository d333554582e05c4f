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

The same walk lists the variables the automation sets itself (:func:`own_variables`): a spec key
becomes an extra var, which outranks them all, so the operator refuses a resource whose spec would
override one (docs/security.md). Set are: ``set_fact`` keys, ``register`` names, ``vars:`` of plays,
blocks, tasks, ``roles:`` entries and ``import_playbook``, role parameters, the keys of ``vars_files``
and of static ``include_vars`` files (and its ``name``), and the top-level keys of every file in a
role's ``vars/``. Inputs -- which a spec may set -- are the keys of a role's ``defaults/``, the options
of its ``meta/argument_specs.yml``, ``vars_prompt`` names, a ``set_fact`` whose value reads the
variable it sets (``size: "{{ size | default(1) }}"``) or that runs only ``when: size is not defined``
(defaults written as tasks), and the names the watch lists in ``specOverrides``.
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
SET_FACT_ACTIONS = frozenset(f"{prefix}set_fact" for prefix in ("", "ansible.builtin.", "ansible.legacy."))
INCLUDE_VARS_ACTIONS = frozenset(f"{prefix}include_vars" for prefix in ("", "ansible.builtin.", "ansible.legacy."))
#: keys of a ``roles:`` entry (or a meta dependency) that are keywords, not role parameters
ROLE_KEYWORDS = frozenset({
    "role", "name", "vars", "tags", "when", "become", "become_user", "become_method", "become_flags", "become_exe",
    "delegate_to", "delegate_facts", "ignore_errors", "ignore_unreachable", "environment", "any_errors_fatal",
    "collections", "connection", "debugger", "check_mode", "diff", "no_log", "port", "remote_user", "run_once",
    "throttle", "timeout", "module_defaults", "tasks_from", "vars_from", "defaults_from", "handlers_from",
    "public", "apply", "allow_duplicates", "rolespec_validate", "src", "scm", "version",
})
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
    #: variable name -> where the automation sets it first (``how at file:line``)
    sets: dict[str, str] = field(default_factory=dict)
    #: variables the automation declares as inputs (role defaults, argument specs, prompts)
    inputs: set[str] = field(default_factory=set)

    def set_here(self, names: Any, how: str, path: Path, line: int) -> None:
        """Record that the automation sets each of ``names`` (templated names are unknowable and skipped)."""
        for name in names:
            if isinstance(name, str) and name and not _templated(name):
                self.sets.setdefault(name, f"{how} at {self.shown(path)}:{line}" if line else
                                     f"{how} in {self.shown(path)}")

    def shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.base_dir))
        except ValueError:
            return str(path)

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
            if imported is not None:
                self.set_here(_keys(play.get("vars")), "import_playbook vars", path, play.line)
            if isinstance(imported, str) and not _templated(imported):
                target = path.parent / imported
                if target.is_file():
                    self.playbook(target)
                else:
                    self.report(path, play.line, f"import_playbook {imported!r}: no such file {target}")
                continue
            collections = [c for c in play.get("collections") or [] if isinstance(c, str)]
            self.play_variables(play, path)
            for entry in play.get("roles") or []:
                self.role_entry_variables(entry, path, play.line)
                self.role_reference(entry, path, play_dir=path.parent, collections=collections)
            for key in TASK_LISTS:
                self.tasks(play.get(key), path, path.parent, path.parent, collections)

    def play_variables(self, play: _Map, path: Path) -> None:
        """The variables a play sets (``vars``, ``vars_files``) or takes as inputs (``vars_prompt``)."""
        self.set_here(_keys(play.get("vars")), "play vars", path, play.line)
        files = play.get("vars_files")
        for entry in files if isinstance(files, list) else [files]:
            for name in entry if isinstance(entry, list) else [entry]:  # a list: the first file found
                if isinstance(name, str) and not _templated(name):
                    self.vars_file(path.parent / name, "vars_files", path, play.line)
        prompts = play.get("vars_prompt")
        for prompt in prompts if isinstance(prompts, list) else []:
            if isinstance(prompt, dict) and isinstance(prompt.get("name"), str):
                self.inputs.add(prompt["name"])

    def role_entry_variables(self, entry: Any, path: Path, line: int) -> None:
        """The ``vars`` and role parameters of a ``roles:`` entry or a meta dependency."""
        if not isinstance(entry, dict):
            return
        where = getattr(entry, "line", 0) or line
        self.set_here(_keys(entry.get("vars")), "role vars of a roles: entry", path, where)
        self.set_here([key for key in entry if key not in ROLE_KEYWORDS], "role parameter", path, where)

    def vars_file(self, target: Path, how: str, path: Path, line: int) -> None:
        """The top-level keys of a variables file (one that is missing or unreadable sets nothing known)."""
        if not target.is_file():
            return
        self.seen.add(target)
        content = self.load(target)
        self.set_here(_keys(content), f"{how} {self.shown(target)} loaded", path, line)

    def task_variables(self, task: _Map, path: Path, tasks_dir: Path) -> None:
        """The variables one task or block sets: ``vars``, ``register``, ``set_fact``, ``include_vars``."""
        self.set_here(_keys(task.get("vars")), "block vars" if _is_block(task) else "task vars", path, task.line)
        register = task.get("register")
        if isinstance(register, str):
            self.set_here([register], "register", path, task.line)
        for action in SET_FACT_ACTIONS & task.keys():
            for name, value in _action_args(task[action], task.get("args")).items():
                if name == "cacheable":
                    continue
                if _reads_itself(name, value) or _unless_defined(name, task.get("when")):
                    self.inputs.add(name)  # a default written as a task: the spec may set it
                else:
                    self.set_here([name], "set_fact", path, task.line)
        for action in INCLUDE_VARS_ACTIONS & task.keys():
            args = _action_args(task[action], task.get("args"), free_form="file")
            if isinstance(args.get("name"), str):
                self.set_here([args["name"]], "include_vars name", path, task.line)
                continue
            for key in ("file", "dir"):
                wanted = args.get(key)
                if not isinstance(wanted, str) or _templated(wanted):
                    continue
                for base in (tasks_dir.parent / "vars", tasks_dir, path.parent):
                    target = base / wanted
                    if key == "file" and target.is_file():
                        self.vars_file(target, "include_vars", path, task.line)
                        break
                    if key == "dir" and target.is_dir():
                        for source in _yaml_files(target):
                            self.vars_file(source, "include_vars", path, task.line)
                        break

    # -- tasks ---------------------------------------------------------------------------------

    def tasks(self, tasks: Any, path: Path, play_dir: Path, tasks_dir: Path, collections: Sequence[str],
              referrer: Path | None = None) -> None:
        for task in _every_task(tasks):
            self.task_variables(task, path, tasks_dir)
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
                if content is not None:
                    self.role_file(sub, source, content, play_dir, collections, directory)

    def role_file(self, sub: str, source: Path, content: Any, play_dir: Path, collections: Sequence[str],
                  directory: Path) -> None:
        """One YAML file of a role: what it sets (``vars/``), takes (``defaults/``, argument specs) or runs."""
        if sub == "vars":
            self.set_here(_keys(content), "role vars", source, 0)
        elif sub == "defaults":
            self.inputs.update(key for key in _keys(content) if isinstance(key, str))
        elif sub == "meta" and isinstance(content, dict):
            self.role_meta(source, content, play_dir, collections, directory)
        elif sub in ("tasks", "handlers"):
            self.tasks(content, source, play_dir, source.parent, collections, referrer=directory)

    def role_meta(self, source: Path, content: dict[str, Any], play_dir: Path, collections: Sequence[str],
                  directory: Path) -> None:
        """A role's ``meta/argument_specs.yml`` (its options are inputs) or ``meta/main.yml`` (dependencies)."""
        if source.stem == "argument_specs":
            specs = content.get("argument_specs")
            for entry in specs.values() if isinstance(specs, dict) else []:
                options = entry.get("options") if isinstance(entry, dict) else None
                self.inputs.update(key for key in _keys(options) if isinstance(key, str))
        elif source.stem == "main":
            role_collections = [c for c in content.get("collections") or [] if isinstance(c, str)]
            for dependency in content.get("dependencies") or []:
                self.role_entry_variables(dependency, source, 0)
                self.role_reference(dependency, source, play_dir=play_dir,
                                    collections=[*collections, *role_collections], referrer=directory)

def check(watches: Sequence[Watch], base_dir: Path, env: Mapping[str, str], cwd: Path | None = None) -> list[str]:
    """Every problem of the automation ``watches`` reference (``file:line: message``); empty when none."""
    walk = _Walk(base_dir.absolute(), env, cwd)
    for watch in watches:
        if isinstance(watch, AnsibleWatch):
            _walk_watch(walk, watch)
    return walk.problems


def own_variables(watch: AnsibleWatch, base_dir: Path, env: Mapping[str, str],
                  cwd: Path | None = None) -> dict[str, str]:
    """The variables ``watch``'s automation (its finalizer's too) sets itself and does not take as an
    input, each with where it is first set; sorted by name. A spec key becoming one is refused, unless
    the watch lists it in ``specOverrides``."""
    return _variables_walk(watch, base_dir, env, cwd)[0]


def _variables_walk(watch: AnsibleWatch, base_dir: Path, env: Mapping[str, str],
                    cwd: Path | None) -> tuple[dict[str, str], set[Path]]:
    walk = _Walk(base_dir.absolute(), env, cwd)
    _walk_watch(walk, watch)
    allowed = walk.inputs | set(watch.spec_overrides)
    names = {name: walk.sets[name] for name in sorted(walk.sets) if name not in allowed}
    return names, set(walk.seen)


def _walk_watch(walk: _Walk, watch: AnsibleWatch) -> None:
    """Walk what a watch's runs load: its playbook or role, and its finalizer's."""
    finalizer = watch.finalizer
    for playbook in (watch.playbook, finalizer.playbook if finalizer else None):
        if playbook is not None:
            walk.playbook(playbook.absolute())
    for role in (watch.role, finalizer.role if finalizer else None):
        if role is not None:
            walk.role(role.absolute(), role.absolute().parent)


class OwnVariables:
    """:func:`own_variables` of one watch, read once and read again when a file it read changes.

    ``current()`` looks at the files (and role directories) the last walk read -- one ``stat`` each --
    and walks again when any of them changed, appeared or went away. Thread-safe enough for the
    reconciler's worker threads: a walk replaces the result whole.
    """

    def __init__(self, watch: AnsibleWatch, base_dir: Path, env: Mapping[str, str], cwd: Path | None = None) -> None:
        self._watch = watch
        self._base_dir = base_dir
        self._env = dict(env)
        self._cwd = cwd
        self._names: dict[str, str] = {}
        self._stamps: dict[Path, tuple[int, int] | None] = {}
        self.walks = 0

    def current(self) -> dict[str, str]:
        """The variables as the automation's files are now."""
        if not self.walks or any(_stamp(path) != stamp for path, stamp in self._stamps.items()):
            self.refresh()
        return self._names

    def refresh(self) -> None:
        """Walk the automation again."""
        names, seen = _variables_walk(self._watch, self._base_dir, self._env, self._cwd)
        paths = set(seen)
        for path in seen:
            if path.is_dir():  # a role: files added to or removed from its directories count too
                paths.update(path / sub for sub in ROLE_DIRS)
                paths.update(sub for sub in path.rglob("*") if sub.is_dir())
        self._stamps = {path: _stamp(path) for path in paths}
        self._names = names
        self.walks += 1


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _keys(value: Any) -> list[Any]:
    return list(value) if isinstance(value, dict) else []


def _is_block(task: Mapping[str, Any]) -> bool:
    return any(isinstance(task.get(key), list) for key in BLOCK_LISTS)


def _every_task(tasks: Any) -> Iterator[_Map]:
    """Every task and block of a task list, blocks included, recursively."""
    if not isinstance(tasks, list):
        return
    for task in tasks:
        if not isinstance(task, _Map):
            continue
        yield task
        for key in BLOCK_LISTS:
            if isinstance(task.get(key), list):
                yield from _every_task(task[key])


def _action_args(value: Any, args: Any, free_form: str | None = None) -> dict[str, Any]:
    """A module's arguments: a map, or ``key=value`` words (a lone word is the ``free_form`` argument)."""
    found: dict[str, Any] = dict(args) if isinstance(args, dict) else {}
    if isinstance(value, dict):
        found.update(value)
    elif isinstance(value, str):
        for word in _words(value):
            key, equals, rest = word.partition("=")
            if equals and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                found[key] = rest
            elif free_form is not None and free_form not in found:
                found[free_form] = word
    return found


def _words(text: str) -> list[str]:
    """``text`` split at blanks outside quotes and Jinja (enough for ``key=value`` arguments)."""
    words, current, quote, depth = [], "", "", 0
    for index, char in enumerate(text):
        pair = text[index:index + 2]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif pair in ("{{", "{%"):
            depth += 1
        elif pair in ("}}", "%}") and depth:
            depth -= 1
        elif char.isspace() and not depth:
            if current:
                words.append(current)
            current = ""
            continue
        current += char
    if current:
        words.append(current)
    return [word.strip("'\"") if "=" not in word else word for word in words]


def _unless_defined(name: str, when: Any) -> bool:
    """Whether a task's ``when`` runs it only while ``name`` is not defined (``when: x is not defined``)."""
    conditions = when if isinstance(when, list) else [when]
    return any(isinstance(condition, str) and re.search(
        rf"(?<![\w.]){re.escape(name)}\s+is\s+(?:not\s+defined|undefined)\b", condition) is not None
        for condition in conditions)


def _reads_itself(name: str, value: Any) -> bool:
    """Whether a ``set_fact`` value is a template reading the variable it sets."""
    text = value if isinstance(value, str) else repr(value)
    return _templated(text) and re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


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
