"""Fixtures of the security tests: an attacker's view of the operator, through its real entry points.

Each test plays someone who may only create or edit a custom resource (or reach a port on loopback,
or hand the operator a hostile watches file) and asserts that nothing ran, leaked or grew. The
helpers live in ``support.attacker``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.attacker import Operator, StartOperator
from support.cluster import Cluster


@pytest.fixture
def start_operator(tmp_path: Path) -> Iterator[StartOperator]:
    started: list[Operator] = []

    def start(cluster: Cluster, watches: Path, artifacts: Path | None,
              env: dict[str, str] | None = None) -> Operator:
        operator = Operator(cluster, watches, tmp_path, artifacts, env)
        started.append(operator)
        return operator

    yield start
    for operator in started:
        operator.stop()


@pytest.fixture(scope="module")
def shared_cluster(session_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    """The session's server seen from namespace ``default``: an attacker's CR names the namespace everyone has."""
    return session_cluster.view(tmp_path_factory.mktemp("security"), "default")
