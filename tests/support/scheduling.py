"""The order in which test files start, so that two to four xdist workers finish together."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent

#: The longest test files, longest first (from ``--durations`` of ``make test`` runs). pytest-xdist
#: hands files to its workers in collection order, a few at a time, so these are collected first: a
#: long file started last would run on its own at the end while the other workers sit idle. The order
#: changes nothing but when a file starts; tests/unit/test_layout.py checks that every name exists.
LONGEST_FIRST = (
    "integration/test_chaos_smoke.py",
    "integration/test_molecule_scenarios.py",
    "e2e/test_sharded_replicas.py",
    "e2e/test_operations.py",
    "e2e/test_dependents.py",
    "e2e/test_reliability.py",
    "integration/test_ansible_bench_smoke.py",
    "e2e/test_database.py",
    "e2e/test_ansible_kinds.py",
    "e2e/test_preview_cli.py",
    "e2e/test_helm_kinds.py",
    "integration/test_ansible_k8s.py",
    "e2e/test_up.py",
    "integration/test_simulated_node.py",
    "integration/test_ansible_runner.py",
    "integration/test_check_cli.py",
    "integration/test_warm_runner.py",
    "integration/test_proxy.py",
    "e2e/test_scaffold_workflow.py",
)
