"""``watches.yaml``: which custom resource kinds the operator reconciles, and with what.

The file is a YAML list; each entry maps one group/version/kind to an Ansible playbook or role
(the Operator SDK Ansible format, ``compat-ansible.md`` §1) or to a Helm chart (the SDK Helm
format, ``compat-helm.md`` §1). :func:`load` turns it into frozen models -- the tagged union
:data:`Watch` = :class:`AnsibleWatch` | :class:`HelmWatch` -- or raises one
:class:`~hybrid_operator.errors.ConfigurationError` listing *every* problem of the file.

Compatible with the SDK:

* ``$VAR`` / ``${VAR}`` are replaced from the environment in the raw text before parsing; an
  undefined variable stays as written. (Only identifier names are references: ``${A-b}`` is text.)
* Defaults: ``manageStatus`` true, ``watchDependentResources`` true, ``watchClusterScopedResources``
  false, ``snakeCaseParameters`` true, ``watchAnnotationsChanges`` false, ``maxRunnerArtifacts``
  0/absent -> 20, ``reconcilePeriod`` 0/absent -> None ("use the ``--reconcile-period`` flag").
* A role resolves to the first existing directory of: the absolute path; for a 3-part FQCN
  ``ns.coll.role``, ``<p>/ansible_collections/ns/coll/roles/role`` for each ``p`` of
  ``ANSIBLE_COLLECTIONS_PATH`` (default ``/usr/share/ansible/collections:~/.ansible/collections``);
  ``<p>/<role>`` then ``<p>/roles/<role>`` for each ``p`` of ``ANSIBLE_ROLES_PATH``;
  ``<base dir>/roles/<role>``.
* Helm ``overrideValues`` values get a second expansion in which an unset variable becomes ``""``
  (Go's ``os.ExpandEnv``), as the SDK's Helm operator does.

Different on purpose:

* **markUnsafe defaults to true**: strings from a CR reach Ansible as unsafe text, never templated,
  so a CR author cannot run Jinja (lookups, commands) inside the operator. Set ``markUnsafe: false``
  to get the SDK's behaviour.
* **Strict validation**: the SDK ignores unknown keys and silently picks ``playbook`` over ``role``;
  here an unknown or misspelled key (with the closest valid key suggested), a wrong type, a bad
  duration, a missing file, both or neither of playbook/role/chart, a duplicate YAML key or GVK, a
  finalizer without a name, ... is an error naming the file, line, entry (numbered from 1) and key.
* **Relative paths** (playbook, role, chart, relative ``ANSIBLE_ROLES_PATH`` entries) resolve against
  the directory of the watches file, not the current directory (in the image both are the same).
* Helm ``overrideValues`` containing Go template expressions (``{{ ... }}``) are refused: the SDK
  renders them with Go's text/template, which this product does not implement.
* Helm ``chart`` may be a chart directory (with ``Chart.yaml``) or a ``.tgz`` archive (as in
  helm-operator-plugins); ``dryRunOption`` is ``""``/``client`` (the default) or ``server``.
* **Hostile files** (docs/security.md): a relative playbook, role or chart path that leaves the
  watches file's directory through ``..`` is an error (absolute paths, as in SDK images'
  ``/opt/ansible/...``, and roles found on ``ANSIBLE_ROLES_PATH``/collections are fine). YAML
  aliases are counted, never expanded: an entry whose aliases would expand it beyond
  :data:`MAX_ENTRY_NODES` values (an "alias bomb": a few hundred bytes that expand to billions),
  or that refers to itself, is an error naming the entry and its key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hybrid_operator.config.entries import EntryReader, Problems, type_name
from hybrid_operator.config.model import GroupVersionKind, Watch, expand_env
from hybrid_operator.errors import ConfigurationError

#: the most YAML values (scalars, lists and maps) one entry may hold once its aliases are followed
MAX_ENTRY_NODES = 10_000


def load(path: Path, env: Mapping[str, str] | None = None) -> list[Watch]:
    """Read, expand, parse and validate a watches file; raise one ConfigurationError listing all problems.

    ``env`` (default: ``os.environ``) supplies ``$VAR`` values, ``ANSIBLE_ROLES_PATH``,
    ``ANSIBLE_COLLECTIONS_PATH`` and ``HOME``.
    """
    environment: Mapping[str, str] = os.environ if env is None else env
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(
            f"{name}: cannot read the watches file: {error}; pass the right path with --watches-file"
        ) from error
    root, data = _parse_yaml(expand_env(text, environment), name)
    problems = Problems(name)
    watches = _read_entries(problems, root, data, Path(path).absolute().parent, environment)
    if len(problems):
        raise ConfigurationError.from_problems(problems.items, source=name)
    return watches


def _parse_yaml(text: str, name: str) -> tuple[yaml.Node | None, Any]:
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        detail = " ".join(str(part) for part in (error.context, error.problem) if part)
        message = f"{name}{line}: invalid YAML: {detail}; fix the syntax at that line"
        raise ConfigurationError(message) from error
    except yaml.YAMLError as error:
        raise ConfigurationError(f"{name}: invalid YAML: {error}") from error
    except RecursionError as error:
        raise ConfigurationError(f"{name}: invalid YAML: nested too deeply") from error
    finally:
        loader.dispose()
    return root, data


def _read_entries(
    problems: Problems, root: yaml.Node | None, data: Any, base_dir: Path, env: Mapping[str, str]
) -> list[Watch]:
    if data is None or data == []:
        problems.add(None, "contains no entries; add one entry per custom resource kind "
                     "(group, version, kind and a playbook, role or chart)")
        return []
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        problems.add(1, "must be a YAML list of entries (start each entry with \"- \"), "
                     f"got {type_name(data)}")
        return []
    watches: list[Watch] = []
    seen: dict[GroupVersionKind, int] = {}
    for index, (node, item) in enumerate(zip(root.value, data, strict=True), start=1):
        entry = EntryReader(problems, index, node, item, base_dir=base_dir, env=env)
        if _report_expansion(entry, node):
            continue  # reading it would walk every expanded value
        watch = entry.read()
        if watch is None:
            continue
        if watch.gvk in seen:
            entry.report(f"duplicate group/version/kind {watch.gvk}, already watched by entry "
                         f"{seen[watch.gvk]}; keep only one entry per kind and version")
            continue
        seen[watch.gvk] = index
        watches.append(watch)
    return watches


def _report_expansion(entry: EntryReader, node: yaml.Node) -> bool:
    """Report (and return True) an entry whose aliases expand beyond :data:`MAX_ENTRY_NODES` or recurse."""
    parts: list[tuple[tuple[str, ...], yaml.Node]] = []
    if isinstance(node, yaml.MappingNode):
        parts = [((str(key.value),), value) for key, value in node.value if isinstance(key, yaml.ScalarNode)]
    parts.append(((), node))
    sizes: dict[int, int | None] = {}
    for keys, part in parts:
        size = expanded_size(part, MAX_ENTRY_NODES, sizes)
        if size is None:
            entry.report("a YAML alias refers to the value that contains it (a recursive alias); "
                         "write the value out instead", *keys)
            return True
        if size > MAX_ENTRY_NODES:
            entry.report(f"YAML aliases expand this to more than {MAX_ENTRY_NODES} values (an alias bomb?); "
                         "write the values out, or use fewer aliases", *keys)
            return True
    return False


def expanded_size(node: yaml.Node, limit: int, sizes: dict[int, int | None] | None = None) -> int | None:
    """How many values ``node`` holds with every alias followed, counted without expanding anything.

    PyYAML composes an alias as a second reference to the anchored node, so the nodes form a graph
    in which each node is counted once per path to it; shared nodes are counted once and their
    count reused (``sizes``, by node identity), so the work is linear in the file's size. Counts
    stop at ``limit + 1``. None when a node contains itself (a recursive alias).
    """
    known: dict[int, int | None] = {} if sizes is None else sizes
    in_progress: set[int] = set()

    def count(current: yaml.Node) -> int | None:
        key = id(current)
        if key in known:
            return known[key]
        if key in in_progress:
            return None
        in_progress.add(key)
        total: int | None = 1
        children: list[yaml.Node] = []
        if isinstance(current, yaml.SequenceNode):
            children = list(current.value)
        elif isinstance(current, yaml.MappingNode):
            children = [child for pair in current.value for child in pair]
        for child in children:
            size = count(child)
            if size is None or total is None:
                total = None
                break
            total = min(total + size, limit + 1)
        in_progress.discard(key)
        known[key] = total
        return total

    return count(node)
