"""The order in which ``make test`` hands test files to its workers (tests/support/scheduling.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from support import scheduling
from support.scheduling import ESTIMATED_SECONDS, LongestFirstScheduling

pytestmark = pytest.mark.unit

CHAOS = "tests/integration/test_chaos_smoke.py"  # one test of about two minutes
MOLECULE = "tests/integration/test_molecule_scenarios.py"
SHARDING = "tests/e2e/test_sharded_replicas.py"
#: the example's estimates (the real ones change with the suite; only their order matters here)
EXAMPLE = {MOLECULE[6:]: 160.0, SHARDING[6:]: 150.0, CHAOS[6:]: 120.0}
COLLECTION = [
    "tests/unit/test_a.py::test_one", "tests/unit/test_a.py::test_two",
    f"{CHAOS}::test_run",
    "tests/unit/test_b.py::test_one",
    f"{SHARDING}::test_kill", f"{SHARDING}::test_scale", f"{SHARDING}::test_old_server",
    f"{MOLECULE}::test_version", f"{MOLECULE}::test_scenario",
]


class Worker:
    """Records what the scheduler sends it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[list[str]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append([COLLECTION[index] for index in indices])

    def shutdown(self) -> None:
        self.shutting_down = True


def scheduler(*workers: Worker) -> LongestFirstScheduling:
    config: Any = SimpleNamespace(getvalue=lambda name: [f"{len(workers)}*popen"] if name == "tx" else None)
    sched = LongestFirstScheduling(config)
    for worker in workers:
        sched.add_node(worker)  # type: ignore[arg-type]
        sched.add_node_collection(worker, COLLECTION)  # type: ignore[arg-type]
    sched.schedule()
    return sched


def files(worker: Worker) -> list[str]:
    return [batch[0].split("::")[0] for batch in worker.sent]


@pytest.fixture(autouse=True)
def example_estimates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduling, "ESTIMATED_SECONDS", EXAMPLE)


def test_the_real_estimates_are_listed_longest_first_and_positive() -> None:
    values = list(ESTIMATED_SECONDS.values())  # the module's own dict, imported before the example's patch
    assert values == sorted(values, reverse=True) and min(values) > 0
    assert len(ESTIMATED_SECONDS) > 10


def test_free_workers_get_the_longest_files_and_a_long_last_test_gets_the_shortest_file_behind_it() -> None:
    first, second, third = Worker("gw0"), Worker("gw1"), Worker("gw2")
    scheduler(first, second, third)
    assert first.sent == [[f"{MOLECULE}::test_version", f"{MOLECULE}::test_scenario"]]
    assert files(second) == [SHARDING]
    # one test of two minutes: a file queued behind it waits, so it is the shortest one left
    assert files(third) == [CHAOS, "tests/unit/test_b.py"]


def test_a_worker_asks_again_on_its_last_known_test_and_gets_the_longest_left_after_a_short_one() -> None:
    first, second = Worker("gw0"), Worker("gw1")
    sched = scheduler(first, second)
    assert files(second) == [SHARDING]
    sched.mark_test_complete(second, COLLECTION.index(f"{SHARDING}::test_kill"))  # type: ignore[arg-type]
    # two of three left: the worker is still busy, nothing more yet
    assert files(second) == [SHARDING]
    sched.mark_test_complete(second, COLLECTION.index(f"{SHARDING}::test_scale"))  # type: ignore[arg-type]
    # its last known test is long (about 50 s): it gets the shortest file, not the chaos smoke
    assert files(second) == [SHARDING, "tests/unit/test_b.py"]
    sched.mark_test_complete(second, COLLECTION.index(f"{SHARDING}::test_old_server"))  # type: ignore[arg-type]
    # its last known test is a short one: now the longest file left
    assert files(second) == [SHARDING, "tests/unit/test_b.py", CHAOS]


def test_every_file_is_sent_once_and_idle_workers_are_shut_down_at_the_end() -> None:
    first, second = Worker("gw0"), Worker("gw1")
    sched = scheduler(first, second)
    for _ in range(20):
        for worker in (first, second):
            pending = [nodeid for batch in worker.sent for nodeid in batch
                       if not sched.assigned_work[worker][nodeid.split("::")[0]][nodeid]]  # type: ignore[index]
            if pending:
                sched.mark_test_complete(worker, COLLECTION.index(pending[0]))  # type: ignore[arg-type]
    sent = [nodeid for worker in (first, second) for batch in worker.sent for nodeid in batch]
    assert sorted(sent) == sorted(COLLECTION)
    assert first.shutting_down and second.shutting_down
    assert sched.tests_finished
