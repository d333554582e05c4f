"""Where the real control plane's binaries live, and how Go is set up to build them.

``make kube`` (scripts/kube_build.py) builds kube-apiserver, kube-controller-manager and our etcd
main from tools/kube into a cache outside the repository, and ``hybrid-operator cluster
--control-plane real`` runs them from there. Both take the paths, the pinned release and the Go
environment from this module, so they cannot disagree: ``${HYBRID_CACHE:-~/.cache/hybrid-operator}
/kube/<release>/bin/`` for the binaries, ``.../kube/go/{mod,build}`` for Go's module and build caches
(shared by every release).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: the k8s.io/kubernetes release tools/kube/go.mod pins (scripts/kube_sync.py writes it; a unit test
#: checks both agree). Every staging module is at the matching v0.<minor>.<patch>.
RELEASE = "v1.36.3"
#: every go.etcd.io/etcd module, and so our etcd server, is at this release
ETCD_RELEASE = "v3.6.16"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager")


class BuildMissing(Exception):
    """The binaries of a release are not in the cache (or Go is missing to build them)."""


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$HYBRID_CACHE``, else ``~/.cache/hybrid-operator``."""
    env = os.environ if environ is None else environ
    configured = env.get("HYBRID_CACHE")
    if configured:
        return Path(configured).expanduser()
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".cache" / "hybrid-operator"


def release_dir(release: str = RELEASE, environ: Mapping[str, str] | None = None) -> Path:
    return cache_root(environ) / "kube" / release


def go_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every go command for tools/kube: its own caches, the local Go, -mod=mod."""
    env = dict(os.environ if environ is None else environ)
    go_dir = cache_root(env) / "kube" / "go"
    env.update({
        "GOMODCACHE": str(go_dir / "mod"),
        "GOCACHE": str(go_dir / "build"),
        # the machine's Go (1.26) is new enough for Kubernetes 1.36; an exported GOTOOLCHAIN is kept
        "GOTOOLCHAIN": env.get("GOTOOLCHAIN") or "local",
        "GOFLAGS": "-mod=mod",
        "CGO_ENABLED": "0",
    })
    return env


@dataclass(frozen=True)
class Binaries:
    """The three programs of one release's build."""

    etcd: Path
    apiserver: Path
    controller_manager: Path


def binaries(release: str = RELEASE, environ: Mapping[str, str] | None = None) -> Binaries:
    """The built binaries of ``release``, or :class:`BuildMissing` saying how to build them."""
    bin_dir = release_dir(release, environ) / "bin"
    paths = {name: bin_dir / name for name in COMPONENTS}
    missing = [name for name, path in paths.items() if not os.access(path, os.X_OK)]
    if missing:
        go_hint = "" if shutil.which("go") else " (it needs Go 1.26 or newer on PATH, which was not found)"
        raise BuildMissing(
            f"the real control plane is not built: {', '.join(missing)} missing in {bin_dir}; "
            f"run `make kube` in the hybrid-operator checkout{go_hint}")
    return Binaries(paths["etcd"], paths["kube-apiserver"], paths["kube-controller-manager"])
