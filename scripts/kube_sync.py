"""Pin tools/kube/go.mod to one Kubernetes release (`make kube-sync`).

`k8s.io/kubernetes` requires its ~30 staging modules (`k8s.io/api`, `k8s.io/apiserver`, ...) at
`v0.0.0` and replaces them with directories of its own repository, so a module that builds its commands
must replace each one with the published `v0.<minor>.<patch>`. This script takes that list from the
go.mod the Go module proxy serves for the release (never typed by hand), writes one
`go mod edit -replace` per staging module, pins every `go.etcd.io/etcd` module to one etcd release,
and runs `go mod tidy`. Run it again with another `--release` to move every k8s.io module at once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from hybrid_operator.localcluster.realplane import build as realbuild

ROOT = Path(__file__).resolve().parent.parent
MODULE_DIR = ROOT / "tools" / "kube"
# The release the launcher looks for in the cache, pinned here by default (a unit test checks that
# go.mod and the launcher agree), and the etcd release every go.etcd.io/etcd module moves to:
# Kubernetes 1.36 requires the etcd client modules at an older 3.6 patch than our etcd server's.
DEFAULT_RELEASE = realbuild.RELEASE
DEFAULT_ETCD = realbuild.ETCD_RELEASE
ETCD_MODULES = (
    "go.etcd.io/etcd/api/v3",
    "go.etcd.io/etcd/client/pkg/v3",
    "go.etcd.io/etcd/client/v3",
    "go.etcd.io/etcd/pkg/v3",
    "go.etcd.io/etcd/server/v3",
)
_RELEASE = re.compile(r"^v1\.(\d+)\.(\d+)$")
_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[A-Za-z0-9._/-]+)\s+=>\s+\./staging/src/(k8s\.io/[A-Za-z0-9._/-]+)\s*$")
_REQUIRE = re.compile(r"^\s*(k8s\.io/[A-Za-z0-9._/-]+)\s+(v\S+)")


def staging_version(release: str) -> str:
    """The staging modules' tag for a Kubernetes release: v1.36.3 -> v0.36.3."""
    match = _RELEASE.match(release)
    if match is None:
        raise ValueError(f"release {release!r} is not a Kubernetes release tag like v1.36.3")
    return f"v0.{match.group(1)}.{match.group(2)}"


def staging_modules(gomod: str) -> list[str]:
    """The staging modules of k8s.io/kubernetes' go.mod: those it replaces with ./staging/src/<path>.

    Each must also be required at v0.0.0 or not at all; anything else means the go.mod is not the
    kind this script understands, and it stops rather than guess.
    """
    staged: list[str] = []
    required: dict[str, str] = {}
    for line in gomod.splitlines():
        line = line.split("//", 1)[0]
        replaced = _STAGING_REPLACE.match(line)
        if replaced is not None:
            if replaced.group(1) != replaced.group(2):
                raise ValueError(f"staging replace of {replaced.group(1)} points at {replaced.group(2)}")
            staged.append(replaced.group(1))
            continue
        required_line = _REQUIRE.match(line)
        if required_line is not None and "=>" not in line:
            required[required_line.group(1)] = required_line.group(2)
    if not staged:
        raise ValueError("no `k8s.io/... => ./staging/src/k8s.io/...` replace in the go.mod")
    for module in staged:
        if required.get(module, "v0.0.0") != "v0.0.0":
            raise ValueError(f"{module} is a staging module but required at {required[module]}, not v0.0.0")
    return sorted(set(staged))


def replace_args(modules: list[str], version: str) -> list[str]:
    """`go mod edit` arguments replacing each staging module with its published version."""
    return [f"-replace={module}={module}@{version}" for module in modules]


def _go(args: list[str], cwd: Path) -> str:
    print("+ go " + " ".join(args), file=sys.stderr)
    done = subprocess.run(["go", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def _existing_replaces(cwd: Path) -> list[str]:
    listed = json.loads(_go(["mod", "edit", "-json"], cwd))
    return [entry["Old"]["Path"] for entry in listed.get("Replace") or []]


def sync(release: str, etcd: str, module_dir: Path) -> list[str]:
    """Pin module_dir/go.mod to `release` and `etcd`; returns the staging modules replaced."""
    version = staging_version(release)
    downloaded = json.loads(_go(["mod", "download", "-json", f"k8s.io/kubernetes@{release}"], module_dir))
    if downloaded.get("Error"):
        raise RuntimeError(f"k8s.io/kubernetes@{release}: {downloaded['Error']}")
    modules = staging_modules(Path(downloaded["GoMod"]).read_text(encoding="utf-8"))
    dropped = [f"-dropreplace={old}" for old in _existing_replaces(module_dir) if old.startswith("k8s.io/")]
    if dropped:
        _go(["mod", "edit", *dropped], module_dir)
    pins = [f"-require=k8s.io/kubernetes@{release}", *(f"-require={m}@{etcd}" for m in ETCD_MODULES)]
    _go(["mod", "edit", *pins, *replace_args(modules, version)], module_dir)
    _go(["mod", "tidy"], module_dir)
    return modules


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", default=DEFAULT_RELEASE, help="k8s.io/kubernetes tag, e.g. v1.36.3")
    parser.add_argument("--etcd", default=DEFAULT_ETCD, help="go.etcd.io/etcd 3.6 tag for every etcd module")
    parser.add_argument("--module-dir", type=Path, default=MODULE_DIR)
    args = parser.parse_args(argv)
    os.environ.update(realbuild.go_environment())
    try:
        modules = sync(args.release, args.etcd, args.module_dir)
    except subprocess.CalledProcessError as failed:
        print(f"kube-sync: `{' '.join(failed.cmd)}` failed:\n{failed.stderr}", file=sys.stderr)
        return 1
    except (ValueError, RuntimeError) as bad:
        print(f"kube-sync: {bad}", file=sys.stderr)
        return 1
    print(f"kube-sync: k8s.io/kubernetes {args.release}, {len(modules)} staging modules at "
          f"{staging_version(args.release)}, etcd {args.etcd}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
