"""For the tests that run the real control plane (marker ``kube``): skipped, with one line, without a build."""

from __future__ import annotations

import pytest

from hybrid_operator.localcluster.realplane import build


def missing_build() -> str | None:
    """Why the real control plane cannot run here, or None when `make kube`'s binaries are in the cache."""
    try:
        build.binaries()
    except build.BuildMissing:
        return f"no real control plane {build.RELEASE} in {build.release_dir()}/bin: run `make kube`"
    return None


#: skip a test when the cache holds no build
needs_build = pytest.mark.skipif(missing_build() is not None, reason=missing_build() or "")
