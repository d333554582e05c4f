"""Shared fixtures: one embedded API server process for the session, a namespace per module or test.

Starting a server, installing CRDs and waiting for them costs seconds each time; most tests only
need somewhere their objects do not meet anyone else's. So the session starts one server (one per
xdist worker) and tests see it through a *view* (``Cluster.view``): the same server, with a HOME
and a kubeconfig of their own whose context names their namespace, so ``kubectl``/``helm`` without
``-n`` land there.

* ``cluster``: a view with a namespace of this test's own, deleted after it.
* ``shared_cluster``: a view with a namespace of this module's own (named after the module, or its
  ``SHARED_NAMESPACE``); every namespace made while the module ran is deleted after it (its helm
  releases, events and leases with it).
* ``own_cluster``: a server process of the test's own, for tests that stop, restart or kill the
  server, start it with other flags, or change what every namespace sees (deleting CRDs).
  A module whose tests all need one overrides ``cluster`` with it.

Deleted namespaces are waited for; finalizers nobody will handle any more (the operators are
stopped by then) are dropped. The helpers live in ``support.cluster``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cluster import Cluster, create_namespace, delete_namespaces, namespace_names
from support.scheduling import LongestFirstScheduling

_serial = itertools.count(1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LongestFirstScheduling | None:
    """``--dist loadfile`` hands the longest files out first (``support.scheduling`` says why)."""
    if config.getoption("dist") != "loadfile":
        return None
    return LongestFirstScheduling(config, log)


def namespace_for(name: str) -> str:
    """A valid, unique namespace name made from a module or test name."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower().removeprefix("test_")).strip("-")
    return f"{slug[:50].rstrip('-')}-{next(_serial)}"


@pytest.fixture(scope="session")
def session_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The server every view points at (not for tests to use directly: take ``cluster`` or ``shared_cluster``)."""
    instance = Cluster(tmp_path_factory.mktemp("session-cluster"))
    instance.start()
    try:
        yield instance
    finally:
        if instance.process is not None:
            instance.stop()


@pytest.fixture
def cluster(session_cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The session's server, seen from a namespace of this test's own."""
    name = namespace_for(request.node.originalname)
    create_namespace(session_cluster, name)
    try:
        yield session_cluster.view(tmp_path / "cluster", name)
    finally:
        delete_namespaces(session_cluster, [name])


@pytest.fixture(scope="module")
def shared_cluster(session_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory,
                   request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The session's server, seen from a namespace of this module's own; the module's namespaces go after it."""
    module = request.module.__name__.rsplit(".", 1)[-1]
    before = namespace_names(session_cluster)
    name = namespace_for(getattr(request.module, "SHARED_NAMESPACE", module))
    create_namespace(session_cluster, name)
    try:
        yield session_cluster.view(tmp_path_factory.mktemp(module), name)
    finally:
        delete_namespaces(session_cluster, sorted(namespace_names(session_cluster) - before))


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A server process of this test's own (the test may stop, restart or kill it)."""
    instance = Cluster(tmp_path)
    instance.start()
    try:
        yield instance
    finally:
        if instance.process is not None:
            instance.stop()
