"""Seeded generators of the spec attacks that try to run commands in the operator (tests/security).

Two families, each a list of reproducible variations (``random.Random(seed)``):

* :func:`key_attacks` -- Jinja in the *keys* of a spec map (issue 28 item 1): a ``pipe`` lookup
  spelled in different ways (``lookup``/``query``/``q``, short and FQCN names, either quote,
  through filters, in ``{% %}`` and after ``{# #}``), at different places (a top-level key, a key
  of a map one to three levels down, a key of a map inside a list), under camelCase or snake_case
  container names;
* :func:`variable_attacks` -- connection, become and shell variables whose values inject a shell
  command (issue 28 item 2): ``ansible_remote_tmp: /x$(cmd)``, ``ansible_shell_executable``,
  ``ansible_become_exe``/``_flags``/``_user`` with become switched on, ``ansible_async_dir``, an ssh
  ``ProxyCommand``..., raw or camelCase.

Every command only creates a marker file. Each marker path is one the snake_case conversion leaves
as it is (lower-case letters and ``_`` only), so a converted key still names it.
"""

from __future__ import annotations

import os
import random
import shutil
import string
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybrid_operator.ansible.extravars import to_snake

COMMANDS = ("id>{marker}", ":>{marker}", "echo>{marker}", "date>{marker}", "true>{marker}")
LOOKUPS = ("lookup('pipe','{command}')", "query('pipe','{command}')", "q('pipe','{command}')",
           "lookup('ansible.builtin.pipe','{command}')", 'lookup("pipe","{command}")')
#: Jinja around a lookup without blanks, upper case or dashes: unchanged by snake_case conversion
SNAKE_SAFE_WRAPS = ("{{{{{expr}}}}}", "{{{{{expr}|string}}}}", "{{{{{expr}|default('x')}}}}",
                    "{{{{({expr})|trim}}}}", "x{{{{{expr}}}}}y", '{{{{{expr}|replace("a","a")}}}}')
#: more Jinja, for kinds without snake_case conversion (blanks would be turned into ``_``)
SPACED_WRAPS = ("{{{{ {expr} }}}}", "{{% if {expr} %}}{{% endif %}}", "{{# note #}}{{{{ {expr} }}}}",
                "{{% set found = {expr} %}}{{{{ found }}}}", "\n{{{{ {expr} | lower }}}}\n")
CONTAINERS = ("features", "myFeatures", "extra_settings", "nodeSelector", "config", "tuning", "pluginOptions")
POSITIONS = ("top", "map", "map", "deep", "list", "list_in_list")


@contextmanager
def marker_directory() -> Iterator[Path]:
    """A new directory for markers whose path snake_case conversion leaves unchanged; removed afterwards."""
    base = Path(os.environ.get("TMPDIR", "/tmp"))
    if to_snake(str(base)) != str(base) or not base.is_dir():
        base = Path("/tmp")
    rng = random.SystemRandom()
    directory = base / ("hopwned_" + "".join(rng.choice(string.ascii_lowercase) for _ in range(16)))
    directory.mkdir(mode=0o700)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True)
class KeyAttack:
    """A spec with one Jinja key; ``parents`` are the raw keys (str) and list indexes (int) above it."""

    name: str
    spec: dict[str, Any]
    parents: tuple[str | int, ...]
    key: str
    marker: Path
    snake: bool

    def converted_parents(self) -> tuple[str | int, ...]:
        """``parents`` as the spec's variables have them (snake_cased when the kind converts keys)."""
        return tuple(to_snake(part) if self.snake and isinstance(part, str) else part for part in self.parents)


def key_attacks(seed: int, count: int, markers: Path, *, snake: bool | None = None,
                prefix: str = "k") -> list[KeyAttack]:
    """``count`` variations of a Jinja key; ``snake`` None mixes kinds with and without snake_case conversion."""
    rng = random.Random(seed)
    attacks = []
    for index in range(count):
        converted = rng.choice((True, False)) if snake is None else snake
        marker = markers / f"{prefix}_{string.ascii_lowercase[index % 26]}{'x' * (index // 26)}"
        command = rng.choice(COMMANDS).format(marker=marker)
        expr = rng.choice(LOOKUPS).format(command=command)
        key = rng.choice(SNAKE_SAFE_WRAPS if converted else SNAKE_SAFE_WRAPS + SPACED_WRAPS).format(expr=expr)
        assert not converted or to_snake(key) == key, key
        position = rng.choice(POSITIONS)
        parents: list[str | int] = []
        if position != "top":
            parents.append(rng.choice(CONTAINERS))
        if position == "deep":
            parents += [rng.choice(CONTAINERS) + "Inner", "level" + rng.choice(("Two", "_two", "3"))]
        elif position == "list":
            parents += [rng.randrange(3)]
        elif position == "list_in_list":
            parents += [rng.randrange(2), "items", rng.randrange(2)]
        # no string in the map holding the key, as in the issue ({"features": {"{{ ... }}": true}}): a string
        # value there would be unsafe, and ansible-core would then mark whatever it derives from the map unsafe;
        # no null either (the API server drops a field whose value is null)
        leaf: dict[str, Any] = {key: rng.choice((True, 1, 2.5, [1], {"n": 2})), "harmless": rng.choice((False, 0))}
        attacks.append(KeyAttack(f"{prefix}{index}", _place(leaf, parents, rng), tuple(parents), key, marker,
                                 converted))
    return attacks


def _place(leaf: dict[str, Any], parents: list[str | int], rng: random.Random) -> dict[str, Any]:
    """A spec holding ``leaf`` under ``parents`` (list indexes get filler items before them), plus noise."""
    node: Any = leaf
    for part in reversed(parents):
        node = [{"filler": number} for number in range(part)] + [node] if isinstance(part, int) else {part: node}
    spec: dict[str, Any] = node if isinstance(node, dict) else {"wrapped": node}
    spec.setdefault("size", rng.randrange(1, 5))
    return spec


def jinja_path(root: str, parents: tuple[str | int, ...]) -> str:
    """A Jinja expression reaching ``root`` then each of ``parents`` (bracket notation; the names are words)."""
    assert all(isinstance(part, int) or part.replace("_", "").isalnum() for part in parents), parents
    return root + "".join(f"[{part}]" if isinstance(part, int) else f"['{part}']" for part in parents)


@dataclass(frozen=True)
class VariableAttack:
    """A spec setting connection/become/shell variables whose values would run a command."""

    name: str
    spec: dict[str, Any]
    marker: Path


def _injections(marker: Path) -> list[dict[str, Any]]:
    touch = f"id>{marker}"
    return [
        {"ansible_remote_tmp": f"/tmp/x$({touch})"},
        {"ansible_remote_tmp": f"/tmp/x`{touch}`"},
        {"ansible_remote_tmp": f"/tmp/x\";{touch};\""},
        {"ansible_shell_executable": f"{touch};/bin/sh"},
        {"ansible_shell_type": "sh", "ansible_remote_tmp": f"$({touch})"},
        {"ansible_become": True, "ansible_become_method": "sudo", "ansible_become_exe": f"{touch};sudo"},
        {"ansible_become": True, "ansible_become_method": "su", "ansible_become_exe": f"{touch};su"},
        {"ansible_become": True, "ansible_become_flags": f"-n;{touch};"},
        {"ansible_become": True, "ansible_become_user": f"root;{touch};"},
        {"ansible_become": True, "ansible_sudo_exe": f"{touch};sudo"},
        {"ansible_async_dir": f"/tmp/x$({touch})"},
        {"ansible_python_interpreter": f"/bin/sh -c '{touch}'"},
        {"ansible_connection": "ssh", "ansible_host": "127.0.0.1",
         "ansible_ssh_common_args": f'-o ProxyCommand="sh -c \'{touch}\'" -o BatchMode=yes'},
        {"ansible_system_tmpdirs": [f"/tmp/x$({touch})"], "ansible_remote_tmp": f"/tmp/y$({touch})"},
        {"ansible_module_compression": "ZIP_STORED", "ansible_remote_tmp": f"~/$({touch})"},
    ]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def variable_attacks(seed: int, count: int, markers: Path, prefix: str = "v") -> list[VariableAttack]:
    """``count`` variations: one to three injections merged, each variable raw or camelCase."""
    rng = random.Random(seed)
    attacks = []
    for index in range(count):
        marker = markers / f"{prefix}_{string.ascii_lowercase[index % 26]}{'x' * (index // 26)}"
        spec: dict[str, Any] = {"size": rng.randrange(1, 5)}
        for injection in rng.sample(_injections(marker), rng.randrange(1, 4)):
            for name, value in injection.items():
                spec[_camel(name) if rng.random() < 0.5 else name] = value
        assert all(to_snake(key).startswith("ansible_") for key in spec if key != "size"), spec
        attacks.append(VariableAttack(f"{prefix}{index}", spec, marker))
    return attacks
