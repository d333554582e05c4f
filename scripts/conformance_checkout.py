"""What ``make conformance`` reads from an Operator SDK test operator's checkout, and how it translates it.

Nothing here builds or runs the checkout's code: it reads its YAML (the ``config/testing`` overlay
as ``kubectl kustomize`` renders it, ``molecule/default``), and turns the image its Dockerfile
describes and the manager container of its Deployment into what ``hybrid-operator run`` gets on
this machine: files laid out where the image has them, environment, flags. Each translation that
is not one to one is a :class:`Notes` line, printed with the results.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: the Operator SDK's ansible-operator image: HOME and WORKDIR
IMAGE_HOME = Path("/opt/ansible")
#: collections hybrid-operator ships itself (the rest come with the ``ansible`` package)
SHIPPED_COLLECTIONS = {"operator_sdk.util": "shipped by hybrid-operator (operator/hybrid_operator/ansible/collections)",
                       "community.kubernetes": "shipped by hybrid-operator as redirects to kubernetes.core"}
#: ansible-operator flags whose value is an address: served on a free loopback port here
ADDRESS_FLAGS = ("--metrics-bind-address", "--metrics-addr", "--health-probe-bind-address")


@dataclass
class Notes:
    """What the translation did that is not one to one (printed with the results)."""

    lines: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        if text not in self.lines:
            self.lines.append(text)


@dataclass
class Manager:
    """The manager container of the overlay's Deployment, as hybrid-operator will run it."""

    args: list[str]
    env: dict[str, str]
    namespace: str


def kubectl() -> str | None:
    """kubectl next to this Python (make setup), else on PATH."""
    sibling = Path(sys.executable).parent / "kubectl"
    return str(sibling) if sibling.is_file() else shutil.which("kubectl")


def render_overlay(checkout: Path, notes: Notes) -> list[dict[str, Any]]:
    """The documents molecule's converge applies: ``kustomize build config/testing`` (kubectl's kustomize)."""
    overlay = checkout / "config" / "testing"
    binary = kubectl()
    if binary is None or not overlay.is_dir():
        notes.add("kubectl (for kustomize) or config/testing missing: applied config/crd/bases, config/rbac and "
                  "config/manager/manager.yaml without the testing overlay's patches")
        return _plain_config(checkout)
    done = subprocess.run([binary, "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(overlay)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "KUBECONFIG": os.devnull})
    if done.returncode != 0:
        raise SystemExit(f"kubectl kustomize {overlay} failed:\n{done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if isinstance(doc, dict)]


def _plain_config(checkout: Path) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for pattern in ("config/crd/bases/*.yaml", "config/rbac/*.yaml", "config/manager/manager.yaml"):
        for path in sorted(checkout.glob(pattern)):
            if path.name != "kustomization.yaml":
                documents += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return documents


#: what molecule substitutes in molecule.yml: ``$$``, ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}``, ``$NAME``
MOLECULE_VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?:(:?-)([^}]*))?\}|\$(\w+)")


def molecule_interpolate(text: str, env: dict[str, str]) -> str:
    """molecule.yml's text with the environment substituted, as molecule does before reading it."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        value = env.get(match.group(1) or match.group(4))
        if (match.group(2) == ":-" and not value) or (match.group(2) == "-" and value is None):
            return match.group(3)
        return value or ""

    return MOLECULE_VARIABLE.sub(one, text)


def molecule_config(checkout: Path) -> dict[str, Any]:
    """``molecule/default/molecule.yml`` as molecule reads it (environment substituted)."""
    scenario = checkout / "molecule" / "default"
    env = {**os.environ, "MOLECULE_PROJECT_DIRECTORY": str(checkout), "MOLECULE_SCENARIO_NAME": "default",
           "MOLECULE_SCENARIO_DIRECTORY": str(scenario)}
    loaded = yaml.safe_load(molecule_interpolate((scenario / "molecule.yml").read_text(), env))
    return loaded if isinstance(loaded, dict) else {}


def molecule_variables(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The inventory's ``group_vars.all`` and ``host_vars.localhost`` of molecule.yml."""
    inventory = (config.get("provisioner") or {}).get("inventory") or {}
    group = ((inventory.get("group_vars") or {}).get("all")) or {}
    host = ((inventory.get("host_vars") or {}).get("localhost")) or {}
    return dict(group), dict(host)


def molecule_namespace(checkout: Path) -> str:
    """``namespace`` of molecule's group_vars (``${TEST_OPERATOR_NAMESPACE:-osdk-test}``), resolved."""
    group, _ = molecule_variables(molecule_config(checkout))
    return str(group.get("namespace") or "osdk-test")


def is_manager(doc: dict[str, Any]) -> bool:
    return doc.get("kind") == "Deployment"


def manager_container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The container the Deployment's ``kubectl.kubernetes.io/default-container`` names, else ``manager``."""
    for doc in documents:
        if not is_manager(doc):
            continue
        template = doc["spec"]["template"]
        wanted = (template.get("metadata", {}).get("annotations") or {}).get(
            "kubectl.kubernetes.io/default-container", "manager")
        for container in template["spec"]["containers"]:
            if container.get("name") == wanted:
                return dict(container)
    raise SystemExit("no manager Deployment in the rendered config")


def translate_env(container: dict[str, Any], namespace: str, notes: Notes) -> dict[str, str]:
    """The container's env; ``fieldRef: metadata.namespace`` is the namespace the overlay deploys into."""
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        name = str(entry["name"])
        if "value" in entry:
            env[name] = str(entry["value"])
            continue
        field_path = ((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if field_path == "metadata.namespace":
            env[name] = namespace
            notes.add(f"env {name}: fieldRef metadata.namespace = {namespace} (the Pod's namespace)")
        else:
            notes.add(f"env {name}: {entry.get('valueFrom')} cannot be resolved outside a Pod; left unset")
    return env


def translate_args(args: list[str], known: set[str], ports: dict[str, int], notes: Notes) -> list[str]:
    """The container's args for ``hybrid-operator run``: addresses on free loopback ports, unknown flags
    dropped (each noted)."""
    result: list[str] = []
    for arg in args:
        name, _, value = arg.partition("=")
        if name in ADDRESS_FLAGS:
            port = ports[name]
            notes.add(f"{name}={value}: served on 127.0.0.1:{port} here (a Pod's port, here a free loopback one)")
            result.append(f"{name}=127.0.0.1:{port}")
        elif name.startswith("--") and name not in known:
            notes.add(f"{arg}: not a hybrid-operator run flag; dropped")
        else:
            result.append(arg)
    return result


def entrypoint_args(dockerfile: Path) -> list[str]:
    """The ``run`` arguments of the Dockerfile's ENTRYPOINT (awx-operator adds ``--reconcile-period=0s``), else
    the base image's ``--watches-file=./watches.yaml``."""
    for instruction, rest in dockerfile_instructions(dockerfile):
        if instruction == "ENTRYPOINT":
            words = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
            if "run" in words:
                return words[words.index("run") + 1:]
    return ["--watches-file=./watches.yaml"]


def dockerfile_instructions(dockerfile: Path) -> list[tuple[str, str]]:
    if not dockerfile.is_file():
        return []
    joined = re.sub(r"\\\n", " ", dockerfile.read_text())
    found = []
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            instruction, _, rest = stripped.partition(" ")
            found.append((instruction.upper(), rest.strip()))
    return found


def expand(text: str, values: dict[str, str]) -> str:
    """``${NAME}`` and ``$NAME`` replaced as a Dockerfile's ENV does (an unknown name is empty)."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda match: values.get(match.group(1) or match.group(2), ""), text)


@dataclass
class Image:
    """The image the Dockerfile describes, laid out on this machine: HOME is ``home`` (seen at
    /opt/ansible when the run has its own mount namespace), other absolute paths under ``root``."""

    checkout: Path
    home: Path
    root: Path
    notes: Notes
    env: dict[str, str] = field(default_factory=dict)
    built: dict[str, Path] = field(default_factory=dict)

    def path(self, text: str) -> Path:
        """An image path (``${HOME}/x``, ``/opt/ansible/x``, ``/etc/x``) on this machine."""
        text = text.replace("${HOME}", str(IMAGE_HOME)).replace("$HOME", str(IMAGE_HOME))
        image = Path(text)
        if image == IMAGE_HOME or IMAGE_HOME in image.parents:
            return self.home / image.relative_to(IMAGE_HOME)
        return self.root / str(image).lstrip("/")

    def build(self, dockerfile: Path) -> None:
        build_args: dict[str, str] = {}
        for instruction, rest in dockerfile_instructions(dockerfile):
            if instruction == "COPY":
                self.copy(rest)
            elif instruction == "RUN":
                for command in re.split(r"\s*&&\s*", rest):
                    self.run(command)
            elif instruction == "ARG":
                key, _, default = rest.partition("=")
                build_args[key.strip()] = default.strip().strip('"')
                if not default:
                    self.notes.add(f"ARG {key.strip()}: no --build-arg here, so empty (as docker build without it)")
            elif instruction == "ENV":
                key, _, value = rest.replace("=", " ", 1).partition(" ")
                self.env[key] = expand(value.strip().strip('"'), {**build_args, **self.env})
            elif instruction == "FROM":
                self.notes.add(f"FROM {rest}: hybrid-operator (this checkout's venv) stands in for that image")
        config = self.root / "etc" / "ansible" / "ansible.cfg"
        if config.is_file():
            self.env["ANSIBLE_CONFIG"] = str(config)
            self.notes.add(f"/etc/ansible/ansible.cfg: read through ANSIBLE_CONFIG={config}")

    def copy(self, rest: str) -> None:
        *sources, target = shlex.split(rest)
        destination = self.path(target)
        for source in sources:
            origin = self.checkout / source
            if origin.is_dir():
                shutil.copytree(origin, destination, dirs_exist_ok=True)
            else:
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(origin, destination if not target.endswith("/") else destination / origin.name)

    def run(self, command: str) -> None:
        """The RUN steps this script knows how to lay out; any other is noted, never executed."""
        words = shlex.split(command)
        if not words or words[0] == "chmod":
            return
        if words[:3] == ["ansible-galaxy", "collection", "install"] and "-r" in words:
            self.requirements(self.path(words[words.index("-r") + 1]))
        elif words[:3] == ["ansible-galaxy", "collection", "build"]:
            source = self.path(words[3])
            meta = yaml.safe_load((source / "galaxy.yml").read_text())
            tarball = f"{meta['namespace']}-{meta['name']}-{meta['version']}.tar.gz"
            self.built[tarball] = source
        elif words[:3] == ["ansible-galaxy", "collection", "install"] and Path(words[3]).name in self.built:
            self.install_collection(self.built[Path(words[3]).name])
        elif words[0] == "echo" and ">" in words:
            split = words.index(">")
            target = self.path(words[split + 1])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(" ".join(words[1:split]) + "\n")
        elif words[:2] == ["ansible-vault", "encrypt_string"] and ">" in words:
            self.vault(words)
        else:
            self.notes.add(f"Dockerfile RUN {command!r}: not translated")

    def requirements(self, path: Path) -> None:
        """``ansible-galaxy collection install -r``: Galaxy is not reachable; say where each collection comes from."""
        spec = importlib.util.find_spec("ansible_collections")  # the ansible package's collections
        locations = list(spec.submodule_search_locations or []) if spec else []
        bundled = Path(locations[0]) if locations else Path(os.devnull)
        for entry in (yaml.safe_load(path.read_text()) or {}).get("collections") or []:
            name = entry["name"] if isinstance(entry, dict) else str(entry)
            wanted = entry.get("version", "*") if isinstance(entry, dict) else "*"
            manifest = bundled.joinpath(*name.split("."), "MANIFEST.json")
            if name in SHIPPED_COLLECTIONS:
                origin = SHIPPED_COLLECTIONS[name]
            elif manifest.is_file():
                version = json.loads(manifest.read_text())["collection_info"]["version"]
                origin = f"{version} from the ansible package"
            else:
                origin = "NOT AVAILABLE (not on PyPI; Galaxy is not reachable)"
            self.notes.add(f"requirements.yml {name} {wanted}: {origin}")

    def install_collection(self, source: Path) -> None:
        meta = yaml.safe_load((source / "galaxy.yml").read_text())
        target = self.home / ".ansible" / "collections" / "ansible_collections" / meta["namespace"] / meta["name"]
        shutil.copytree(source, target, dirs_exist_ok=True)
        self.notes.add(f"collection {meta['namespace']}.{meta['name']}: build + install laid out as a copy in "
                       "~/.ansible/collections")

    def vault(self, words: list[str]) -> None:
        split = words.index(">")
        arguments = [str(self.path(w)) if w.startswith(("/", "${HOME}")) else w for w in words[1:split]]
        vault = Path(sys.executable).parent / "ansible-vault"
        done = subprocess.run([str(vault), *arguments], capture_output=True, text=True, timeout=120, check=True,
                              env={**os.environ, "HOME": str(self.home)})
        target = self.path(words[split + 1])
        target.write_text(done.stdout)


def replay_tasks(test: Path, metrics_url: str, token_variable: str, out_dir: Path, notes: Notes) -> Path:
    """The test file to include: ``out_dir``'s copy, rewritten where its ``k8s_exec`` of ``curl .../metrics``
    in the manager Pod reads our metrics endpoint instead (same registered variable, same ``stdout``);
    the file itself when ``out_dir`` has no copy and nothing needs rewriting.

    The scrape presents a bearer token as the curl does (there, the Pod's service account token; here
    the operator's own credentials, from the environment variable ``token_variable``), so
    ``--metrics-require-rbac`` is exercised: a refused scrape fails the test."""
    tasks = yaml.safe_load(test.read_text())
    if not isinstance(tasks, list):
        return test
    changed = False
    for index, task in enumerate(tasks):
        exec_args = (task.get("kubernetes.core.k8s_exec") or task.get("k8s_exec")) if isinstance(task, dict) else None
        if not isinstance(exec_args, dict) or "/metrics" not in str(exec_args.get("command", "")):
            continue
        register = task.get("register", "metrics_output")
        bearer = f"Bearer {{{{ lookup('env', '{token_variable}') }}}}"
        name = f"{task.get('name', 'metrics')} (replayed: GET {metrics_url} with a bearer token)"
        tasks[index] = {"name": name, "block": [
            {"ansible.builtin.uri": {"url": metrics_url, "validate_certs": False, "return_content": True,
                                     "headers": {"Authorization": bearer}},
             "register": "_hybrid_metrics"},
            {"ansible.builtin.set_fact": {register: {"stdout": "{{ _hybrid_metrics.content }}"}}}]}
        changed = True
        notes.add(f"{test.name}: the k8s_exec of curl .../metrics inside the manager Pod is replayed as a GET of "
                  f"{metrics_url} with the operator's bearer token (no container runs here)")
    copy = out_dir / test.name
    if not changed:
        return copy if copy.is_file() else test
    out_dir.mkdir(parents=True, exist_ok=True)
    copy.write_text(yaml.safe_dump(tasks, sort_keys=False))
    return copy
