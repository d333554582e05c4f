"""e2e fixtures: start `hybrid-operator run` processes that are stopped after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.cluster import Cluster
from support.operator import OperatorProcess


@pytest.fixture
def start_operator(tmp_path: Path) -> Iterator[Callable[..., OperatorProcess]]:
    started: list[OperatorProcess] = []

    def start(cluster: Cluster, watches: Path, *args: str) -> OperatorProcess:
        process = OperatorProcess(cluster, watches, tmp_path, *args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


