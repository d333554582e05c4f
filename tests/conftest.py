"""Shared fixtures: a real embedded API server process per test (or per module).

Every test gets its own port, data dir, kubeconfig and HOME (kubectl caches
discovery under ~/.kube/cache, the Python client under /tmp keyed by host), so
tests never see each other's state.  The helpers live in ``support.cluster``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cluster import Cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    instance = Cluster(tmp_path)
    instance.start()
    try:
        yield instance
    finally:
        if instance.process is not None:
            instance.stop()


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster for a whole test module (for suites of independent reads/writes)."""
    instance = Cluster(tmp_path_factory.mktemp("cluster"))
    instance.start()
    try:
        yield instance
    finally:
        if instance.process is not None:
            instance.stop()


# -- raw HTTPS access (precise protocol checks) ------------------------------------------


