"""What the project teaches and what it exposes by default (docs/security.md, "Samples" and "Network").

* No sample passes a value from a custom resource to a shell: samples are what users copy. Every
  playbook, role and chart template of the repository and of the scaffolds is read; a shell command
  line (``sh -c``/``bash -c`` arguments, the ``shell`` module, a ``command`` given as one string)
  may not contain a template expression. Values reach workloads as environment variables or
  arguments.
* ``hybrid-operator up`` (a development setup) serves metrics and probes on 127.0.0.1 by default;
  ``run`` keeps the SDK's ``:8080``/``:8081``, which a pod's probes and Prometheus need.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hybrid_operator.cli import commands
from support.cluster import REPO

pytestmark = [pytest.mark.security, pytest.mark.unit]

TEMPLATE = re.compile(r"\{\{|\{%|\$\{\{")
SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh", "/bin/sh", "/bin/bash", "/bin/ash", "/usr/bin/env"})
SHELL_MODULES = frozenset({"shell", "ansible.builtin.shell", "ansible.legacy.shell", "raw", "ansible.builtin.raw",
                           "command", "ansible.builtin.command", "ansible.legacy.command", "script",
                           "ansible.builtin.script"})
SAMPLE_ROOTS = [REPO / "playbooks", REPO / "roles", REPO / "charts",
                REPO / "operator" / "hybrid_operator" / "authoring" / "templates"]
#: the scaffold's molecule scenario drives the test harness with the harness's own variables, never a CR's
HARNESS = REPO / "operator" / "hybrid_operator" / "authoring" / "templates" / "molecule"


def sample_files() -> list[Path]:
    found = []
    for root in SAMPLE_ROOTS:
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".tpl", ".j2") and HARNESS not in path.parents:
                found.append(path)
    return found


def walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def shell_lines(document: Any) -> Iterator[str]:
    """The text of every shell command line in a YAML document: container commands and Ansible tasks."""
    for node in walk(document):
        if isinstance(node, dict):
            argv = [*(node.get("command") or []), *(node.get("args") or [])] \
                if isinstance(node.get("command"), list) else []
            if argv and str(argv[0]) in SHELLS:
                yield " ".join(str(arg) for arg in argv[1:])
            for module in SHELL_MODULES & node.keys():
                body = node[module]
                yield body if isinstance(body, str) else str((body or {}).get("cmd", "")) \
                    if isinstance(body, dict) else ""


@pytest.mark.parametrize("path", sample_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_no_template_value_reaches_a_shell(path: Path) -> None:
    text = path.read_text()
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError:  # a Helm or scaffold template, YAML only once rendered: read its lines
        for line in text.splitlines():
            shell = re.search(r"""(["']?(ba)?sh["']?\s*,\s*["']?-c["']?|\bshell:)(.*)""", line)
            assert not (shell and TEMPLATE.search(shell.group(3))), f"{path}: {line.strip()}"
        return
    for document in documents:
        for line in shell_lines(document):
            assert not TEMPLATE.search(line), f"{path}: a template value reaches a shell: {line!r}"


def test_the_realibox_sample_passes_the_domain_as_an_environment_variable() -> None:
    play = yaml.safe_load((REPO / "playbooks" / "realibox.yml").read_text())[0]
    pod = next(task for task in play["tasks"] if "kubernetes.core.k8s" in task)["kubernetes.core.k8s"]
    container = pod["definition"]["spec"]["containers"][0]
    assert not any(TEMPLATE.search(str(arg)) for arg in container["command"])
    assert {"name": "DOMAIN", "value": "{{ domain }}"} in container["env"]


def test_up_serves_metrics_and_probes_on_loopback_by_default() -> None:
    args = commands.build_parser().parse_args(["up"])
    # loopback only, on ports the system picks (printed by up): a second up never collides
    assert args.metrics_bind_address == "127.0.0.1:0"
    assert args.health_probe_bind_address == "127.0.0.1:0"


def test_run_keeps_the_sdk_defaults() -> None:
    args = commands.build_parser().parse_args(["run"])
    assert (args.metrics_bind_address, args.health_probe_bind_address) == (":8080", ":8081")
