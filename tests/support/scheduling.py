"""How ``make test`` spreads test files over its xdist workers, so that the workers finish together.

pytest-xdist's ``--dist loadfile`` keeps a file's tests on one worker (module fixtures such as an
operator process are shared as written) but orders the files by their *number of tests* and hands a
worker its next file while it still has two tests to run. Our long files are long because of one or
two tests (the chaos smoke is one test of two minutes), so they were handed out last, and a file
queued behind such a test waited for it while other workers sat idle: one worker finished two
minutes after the others.

``LongestFirstScheduling`` is list scheduling, longest file first: a worker that is free gets the
longest file left. A worker asks for its next file while it runs its last known test (the worker
needs the test after it before it can start it); if that test is expected to be long, the worker
gets the *shortest* file left, which costs nothing to keep waiting, and the long ones go to workers
that are free. The estimates below are wall seconds per file from ``--durations``-style runs of
``make test`` on the 2-core machine; they only order, so they need not be exact. A file missing
from the list counts as short. ``tests/unit/test_layout.py`` fails when a name here is gone.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadFileScheduling

TESTS = Path(__file__).resolve().parent.parent

#: Wall seconds of the longest test files on three workers (2 cores, 2026-12-03), relative to tests/.
ESTIMATED_SECONDS: dict[str, float] = {
    "e2e/test_reliability.py": 124,
    "e2e/test_operations.py": 91,
    "integration/test_molecule_scenarios.py": 75,
    "integration/test_chaos_smoke.py": 74,
    "e2e/test_sharded_replicas.py": 70,
    "e2e/test_helm_kinds.py": 55,
    "e2e/test_dependents.py": 51,
    "security/test_cluster_connections.py": 47,
    "e2e/test_preview_cli.py": 42,
    "integration/test_ansible_bench_smoke.py": 42,
    "integration/test_ansible_runner.py": 40,
    "integration/test_ansible_k8s.py": 37,
    "e2e/test_ansible_kinds.py": 34,
    "e2e/test_up.py": 26,
    "e2e/test_database.py": 24,
    "integration/test_warm_modules.py": 20,
    "security/test_cluster_data_on_disk.py": 19,
    "integration/test_proxy.py": 19,
    "integration/test_warm_runner.py": 18,
    "integration/test_simulated_node.py": 17,
    "integration/test_check_cli.py": 15,
    "security/test_proxy_connections.py": 15,
    "security/test_cluster_watch_timeouts.py": 14,
    "integration/test_restart.py": 11,
    "integration/test_watch.py": 11,
    "security/test_secrets_at_rest.py": 10,
    "integration/test_storage.py": 10,
    "integration/test_helm.py": 9,
    "integration/test_kubectl.py": 9,
    "integration/test_kopf.py": 8,
    "e2e/test_scaffold_workflow.py": 8,
    "integration/test_run_environment.py": 6,
    "unit/test_dockerfile.py": 6,
    "integration/test_garbage_collection.py": 5,
    "integration/test_newcomer_pieces.py": 5,
    "integration/test_helm_runner.py": 4,
    "security/test_cluster_fuzz.py": 4,
    "integration/test_generate_cli.py": 2,
}

#: A file not in ESTIMATED_SECONDS: most take well under a second.
SHORT_FILE_SECONDS = 1.0

#: A last known test expected to take longer than this gets the shortest file queued behind it.
LONG_TEST_SECONDS = 5.0


def estimate(nodeid_file: str) -> float:
    """The expected wall seconds of a test file, from its node id prefix (``tests/e2e/test_x.py``)."""
    return ESTIMATED_SECONDS.get(nodeid_file.split("tests/", 1)[-1], SHORT_FILE_SECONDS)


class LongestFirstScheduling(LoadFileScheduling):
    """``--dist loadfile`` with the files handed out longest first (see the module docstring)."""

    def schedule(self) -> None:
        if self.collection is None:
            if not self._check_nodes_have_same_collection():
                self.log("collections differ, not scheduling")
                return
            self.collection = list(next(iter(self.registered_collections.values())))
            units: dict[str, dict[str, bool]] = {}
            for nodeid in self.collection:
                units.setdefault(self._split_scope(nodeid), {})[nodeid] = False
            ordered = sorted(units, key=lambda scope: -estimate(scope))  # stable: ties keep collection order
            self.workqueue = OrderedDict((scope, units[scope]) for scope in ordered)
        for node in self.nodes:
            self._reschedule(node)
            self._reschedule(node)  # a first file of one long test is followed by a short one at once

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        pending = [(scope, nodeid) for scope, tests in self.assigned_work[node].items()
                   for nodeid, done in tests.items() if not done]
        if len(pending) > 1:
            return
        if pending:
            scope = pending[0][0]
            per_test = estimate(scope) / len(self.assigned_work[node][scope])
            if per_test > LONG_TEST_SECONDS:
                self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)  # the shortest
        self._assign_work_unit(node)  # xdist's: sends the first unit of the queue
