"""For the tests that run the real control plane (marker ``kube``): skipped, with one line, without a build;
the cluster process, started with ``--control-plane real``."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hybrid_operator.localcluster.realplane import build
from support.cluster import Cluster


def missing_build() -> str | None:
    """Why the real control plane cannot run here, or None when `make kube`'s binaries are in the cache."""
    try:
        build.binaries()
    except build.BuildMissing:
        return f"no real control plane {build.RELEASE} in {build.release_dir()}/bin: run `make kube`"
    return None


#: skip a test when the cache holds no build
needs_build = pytest.mark.skipif(missing_build() is not None, reason=missing_build() or "")

#: seconds a real control plane is given to serve (etcd, kube-apiserver, then the controller-manager)
START_TIMEOUT = 240


class RealCluster(Cluster):
    """The support Cluster, started with --control-plane real, given time to stop three processes in turn."""

    def __init__(self, workdir: Path, extra_args: tuple[str, ...] = ()) -> None:
        super().__init__(workdir, extra_args=("--control-plane", "real", *extra_args))

    def start(self, timeout: float = START_TIMEOUT) -> None:
        super().start(timeout)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        self.process.send_signal(sig)
        code = self.process.wait(timeout=150)
        self.process = None
        return code
