"""`hybrid-operator generate` on this repository, and the authoring commands' exit codes.

The committed config/crd, config/rbac and config/manager must be exactly what `generate all`
(`make manifests`) produces: a change to watches.yaml, schemas/, roles/, playbooks/ or charts/
without regenerating fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.cluster import REPO

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "hybrid_operator.cli"]


def hybrid(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.yaml"))}


def test_generate_all_reproduces_the_committed_manifests(tmp_path: Path) -> None:
    result = hybrid("generate", "all", "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr
    generated = files(tmp_path)
    committed = {path: data for path, data in files(REPO / "config").items()
                 if path.split("/")[0] in ("crd", "rbac", "manager")}
    assert sorted(generated) == sorted(committed), "run `make manifests` and commit config/"
    stale = [path for path in generated if generated[path] != committed[path]]
    assert stale == [], f"stale manifests (run `make manifests`): {stale}"


def test_generate_is_deterministic_and_says_when_nothing_changed(tmp_path: Path) -> None:
    first = hybrid("generate", "rbac", "--output", str(tmp_path))
    second = hybrid("generate", "rbac", "--output", str(tmp_path))
    assert "wrote rbac/role.yaml" in first.stdout
    assert second.stdout.strip() == "manifests are up to date"


@pytest.mark.parametrize(("args", "message"), [
    (["create", "api", "--group", "web", "--version", "v1", "--kind", "lower", "--generate-role"], "invalid --kind"),
    (["create", "api", "--group", "web", "--version", "one", "--kind", "Shop", "--generate-role"], "invalid --version"),
    (["create", "api", "--group", "Web!", "--version", "v1", "--kind", "Shop", "--generate-role"], "invalid --group"),
    (["create", "api", "--group", "web", "--version", "v1", "--kind", "Shop", "--helm-chart", "missing"],
     "chart not found"),
])
def test_create_api_bad_input_exits_2_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    assert hybrid("init", "--domain", "example.com", str(tmp_path / "p")).returncode == 0
    before = sorted(p for p in (tmp_path / "p").rglob("*"))
    result = hybrid(*args, cwd=tmp_path / "p")
    assert result.returncode == 2
    assert message in result.stderr
    assert sorted(p for p in (tmp_path / "p").rglob("*")) == before


def test_create_api_needs_exactly_one_flavour(tmp_path: Path) -> None:
    result = hybrid("create", "api", "--group", "web", "--version", "v1", "--kind", "Shop", "--generate-role",
                    "--new-chart", cwd=tmp_path)
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr


def test_init_twice_is_refused(tmp_path: Path) -> None:
    assert hybrid("init", str(tmp_path)).returncode == 0
    again = hybrid("init", str(tmp_path))
    assert again.returncode == 2
    assert "never overwrites" in again.stderr
