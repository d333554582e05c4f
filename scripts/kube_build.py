"""Build the real control plane (`make kube`): kube-apiserver, kube-controller-manager and etcd.

The binaries come from tools/kube (go.mod pinned by scripts/kube_sync.py) and go to
``${HYBRID_CACHE:-~/.cache/hybrid-operator}/kube/<release>/bin``, built the way Kubernetes' own
hack/lib/golang.sh builds its static binaries: ``CGO_ENABLED=0``, ``-trimpath``, tags
``selinux,notest,grpcnotrace``, ``-s -w``, and the version variables of hack/lib/version.sh set with
``-X`` so ``/version`` reports the release. A stamp beside the binaries records a hash of everything the
build reads (go.mod, go.sum, our etcd main, the flags): when it matches, the build is reused at once;
any change rebuilds. Output goes to ``bin.new`` first and replaces ``bin`` whole, so an interrupted
build never leaves a half set.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hybrid_operator.localcluster.realplane import build as realbuild

ROOT = Path(__file__).resolve().parent.parent
MODULE_DIR = ROOT / "tools" / "kube"
PACKAGES = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "etcd": "hybrid-operator/tools/kube/cmd/etcd",
}
#: hack/lib/golang.sh, non-debug build: "selinux,notest" plus "grpcnotrace"
TAGS = "selinux,notest,grpcnotrace"
#: the packages whose version variables hack/lib/version.sh sets
VERSION_PACKAGES = ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")
#: the files whose content decides the build
INPUTS = ("go.mod", "go.sum", "cmd/etcd/main.go")


class BuildError(Exception):
    """A step of the build failed; the message says which and what to do."""


def _go(args: list[str], env: dict[str, str], cwd: Path) -> str:
    try:
        done = subprocess.run(["go", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)
    except FileNotFoundError as missing:
        raise BuildError("Go is not installed or not on PATH: install Go 1.26 or newer, then run `make kube`") \
            from missing
    except subprocess.CalledProcessError as failed:
        raise BuildError(f"`go {' '.join(args)}` failed:\n{failed.stderr}") from failed
    return done.stdout


def pinned_release(env: dict[str, str], cwd: Path) -> str:
    """The k8s.io/kubernetes version tools/kube/go.mod requires."""
    edited = json.loads(_go(["mod", "edit", "-json"], env, cwd))
    for required in edited.get("Require") or []:
        if required["Path"] == "k8s.io/kubernetes":
            return str(required["Version"])
    raise BuildError(f"{cwd / 'go.mod'} requires no k8s.io/kubernetes: run `make kube-sync`")


def release_date(release: str, env: dict[str, str], cwd: Path) -> str:
    """The release's commit time from the module proxy: a build date that is the same on every machine."""
    info = json.loads(_go(["mod", "download", "-json", f"k8s.io/kubernetes@{release}"], env, cwd))
    released = json.loads(Path(info["Info"]).read_text(encoding="utf-8"))["Time"]
    stamp = time.strptime(released[:19], "%Y-%m-%dT%H:%M:%S")
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", stamp)


def ldflags(release: str, build_date: str) -> str:
    """hack/lib/version.sh's -X flags for a release, plus -s -w as for a non-debug build."""
    major, minor = release.lstrip("v").split(".")[:2]
    values = {"buildDate": build_date, "gitCommit": "unknown", "gitTreeState": "clean", "gitVersion": release,
              "gitMajor": major, "gitMinor": minor}
    flags = [f"-X '{package}.{key}={value}'" for key, value in values.items() for package in VERSION_PACKAGES]
    return "all=" + " ".join([*flags, "-s", "-w"])


def build_args(release: str, build_date: str, output: Path) -> list[str]:
    return ["build", "-trimpath", f"-tags={TAGS}", f"-ldflags={ldflags(release, build_date)}",
            "-o", f"{output}/", *PACKAGES.values()]


def stamp_of(args: list[str], module_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in INPUTS:
        digest.update(name.encode() + b"\0" + (module_dir / name).read_bytes() + b"\0")
    digest.update("\0".join(args).encode())
    return digest.hexdigest()


def build(module_dir: Path, force: bool = False) -> Path:
    """Build (or reuse) the binaries of the pinned release; returns their directory."""
    env = realbuild.go_environment()
    release = pinned_release(env, module_dir)
    if release != realbuild.RELEASE:
        raise BuildError(f"tools/kube/go.mod pins k8s.io/kubernetes {release}, but the launcher expects "
                         f"{realbuild.RELEASE} (hybrid_operator/localcluster/realplane/build.py): run "
                         f"`make kube-sync` or change RELEASE so that both agree")
    target = realbuild.release_dir(release)
    bin_dir, stamp_path = target / "bin", target / "stamp"
    # the stamp does not depend on where the output goes
    stamp = stamp_of(build_args(release, "", Path("-")), module_dir)
    if not force and stamp_path.exists() and stamp_path.read_text().strip() == stamp \
            and all(os.access(bin_dir / name, os.X_OK) for name in PACKAGES):
        print(f"kube: {release} is built and up to date in {bin_dir}")
        return bin_dir
    staging = target / "bin.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    started = time.monotonic()
    args = build_args(release, release_date(release, env, module_dir), staging)
    print(f"kube: building {', '.join(PACKAGES)} {release} into {bin_dir} (a first build takes 10-25 minutes)",
          flush=True)
    _go(args, env, module_dir)
    shutil.rmtree(bin_dir, ignore_errors=True)
    staging.rename(bin_dir)
    stamp_path.write_text(stamp + "\n")
    print(f"kube: built in {time.monotonic() - started:.0f} s: {bin_dir}")
    return bin_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module-dir", type=Path, default=MODULE_DIR)
    parser.add_argument("--force", action="store_true", help="rebuild even when the stamp matches")
    args = parser.parse_args(argv)
    try:
        build(args.module_dir, force=args.force)
    except BuildError as failed:
        print(f"kube: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
