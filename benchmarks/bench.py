"""``make bench``: the figures of issue 16, each against a baseline measured in the same run.

Why it exists: performance claims about the runner only mean something next to the naive path on
the same machine at the same moment. Every figure here is interleaved with its baseline (one
measured run of each, alternating), repeated, and reported as medians with the ratio.

Figures (``--quick`` shrinks the counts for the smoke test and runs the runner, end-to-end and Helm
parts side by side: a smoke run that checks the table and its rows, not a measurement):

* one-task playbook run through the operator's runner (warm, and cold), against a naive
  fresh-process ``ansible-runner run`` of the same playbook with the same ``ANSIBLE_GATHERING``;
* N one-task runs submitted at once at the default concurrency (CPU count), against N naive runs
  one after another; with the peak RSS of this process and its descendants during the burst;
* end to end through the embedded cluster and a running operator (:mod:`bench_e2e`): CR create ->
  ``Successful=True`` for a one-``debug``-task role and a one-``k8s``-ConfigMap-task role, each
  interleaved with a naive run of the same playbook; a burst of ConfigMap CRs against naive serial
  runs, with the peak RSS of the operator's process tree; idle CRs at a 10 s reconcile period (the
  intervals actually seen); the operator's and the warm worker's RSS with many converged CRs.

Helm rows come from ``benchmarks/helm_bench.py`` (see :func:`helm_rows`). Shared helpers (the naive
run, RSS sampling, :class:`benchkit.Row`) live in :mod:`benchkit`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import bench_e2e
import helm_bench
from benchkit import GATHERING, PeakRss, Row, naive_run

from hybrid_operator.ansible.runner import AnsibleRunner, RunnerMode
from hybrid_operator.ansible.runs import RunRequest
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind

REPO = Path(__file__).resolve().parents[1]
GVK = GroupVersionKind("bench.example.com", "v1", "Bench")
PLAYBOOK = "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug:\n        msg: hello\n"


def request(work: Path, playbook: Path, index: int) -> RunRequest:
    cr = {"apiVersion": "bench.example.com/v1", "kind": "Bench",
          "metadata": {"name": f"b{index}", "namespace": "default", "uid": str(index)}, "spec": {}}
    return RunRequest(cr=cr, watch=AnsibleWatch(gvk=GVK, playbook=playbook), artifacts_root=work / "artifacts",
                      env={"ANSIBLE_GATHERING": GATHERING}, max_artifacts=2)


async def timed_run(runner: AnsibleRunner, work: Path, playbook: Path, index: int) -> float:
    started = time.monotonic()
    result = await runner.run(request(work, playbook, index))
    if not result.succeeded:
        raise RuntimeError(f"benchmark run failed: {result.failure_message}")
    return time.monotonic() - started


async def single_runs(work: Path, playbook: Path, repeats: int) -> list[Row]:
    """Warm and cold runner runs, each interleaved with a naive run."""
    rows = []
    for mode in ("warm", "cold"):
        runner = AnsibleRunner(max_workers=1, work_dir=work, project_dir=work, mode=mode)
        try:
            await timed_run(runner, work, playbook, 0)  # the worker starts, the zygote is found
            await timed_run(runner, work, playbook, 0)
            mine, naive = [], []
            for index in range(repeats):
                mine.append(await timed_run(runner, work, playbook, index))
                naive.append(await asyncio.to_thread(naive_run, work, playbook))
        finally:
            await runner.close()
        rows.append(Row(f"one-task playbook run, {mode} runner (median of {repeats})", statistics.median(mine),
                        "naive fresh `ansible-runner run`, same gathering", statistics.median(naive)))
    return rows


async def burst(work: Path, playbook: Path, count: int, mode: RunnerMode) -> tuple[float, float]:
    concurrency = os.cpu_count() or 1
    runner = AnsibleRunner(max_workers=concurrency, work_dir=work, project_dir=work, mode=mode)
    try:
        await timed_run(runner, work, playbook, 0)
        await timed_run(runner, work, playbook, 0)
        with PeakRss() as peak:
            started = time.monotonic()
            await asyncio.gather(*(timed_run(runner, work, playbook, index) for index in range(count)))
            elapsed = time.monotonic() - started
    finally:
        await runner.close()
    return elapsed, peak.peak


async def burst_rows(work: Path, playbook: Path, count: int) -> list[Row]:
    """``count`` runs at once (warm) against ``count`` naive runs in series, interleaved by halves."""
    half = max(1, count // 2)
    serial = sum(naive_run(work, playbook) for _ in range(half))
    elapsed, peak = await burst(work, playbook, count, "warm")
    serial += sum(naive_run(work, playbook) for _ in range(count - half))
    return [
        Row(f"{count} one-task runs at once, warm, concurrency {os.cpu_count()}", elapsed,
            f"{count} x naive serial", serial),
        Row(f"peak RSS of the process tree during the {count}-run burst", peak, "target 600 MiB", 600.0, unit="MiB"),
    ]


def helm_rows(quick: bool) -> list[Row]:
    """The Helm no-change resync figures of :mod:`helm_bench`, against ``helm upgrade`` in the same run."""
    return [Row(row["metric"], row["value"], "`helm upgrade`, same values", row["baseline"], unit=row["unit"])
            for row in helm_bench.measure(quick)]


def machine_facts() -> list[str]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"
    memory = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), "?")
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return [f"- commit `{commit}`, {platform.python_implementation()} {platform.python_version()}",
            f"- nproc {os.cpu_count()}, memory {int(memory) // 1024} MiB, load average {load} (at the end)"]


def render(rows: list[Row], quick: bool, elapsed: float) -> str:
    def fmt(value: float | None, unit: str) -> str:
        return "n/a" if value is None else (f"{value:.0f} {unit}" if unit == "MiB" else f"{value:.3f} {unit}")

    lines = ["| figure | value | baseline (same run) | baseline value | ratio | note |", "|---|---|---|---|---|---|"]
    lines += [f"| {row.figure} | {fmt(row.value, row.unit)} | {row.baseline_name} | {fmt(row.baseline, row.unit)} | "
              f"{row.ratio} | {row.note} |" for row in rows]
    mode = "quick (smoke) run, its parts side by side: not a measurement" if quick else "full run"
    return "\n".join([*lines, "", f"{mode}, {elapsed:.0f} s; medians; ratio < 1 means faster than the baseline.",
                      *machine_facts()]) + "\n"


async def measure(quick: bool, work: Path) -> list[Row]:
    playbook = work / "one-task.yml"
    playbook.write_text(PLAYBOOK)

    async def runner_rows() -> list[Row]:
        return [*await single_runs(work, playbook, 1 if quick else 10),
                *await burst_rows(work, playbook, 2 if quick else 200)]

    # helm_bench.measure runs its own event loop: in a thread, not inside this one
    parts: list[Callable[[], Awaitable[list[Row]]]] = [
        runner_rows, lambda: asyncio.to_thread(bench_e2e.measure, quick, work),
        lambda: asyncio.to_thread(helm_rows, quick)]
    if quick:  # a smoke run: the parts side by side (a third of the time), their figures not comparable
        results = await asyncio.gather(*(part() for part in parts))
    else:
        results = [await part() for part in parts]
    return [row for rows in results for row in rows]


HEADER = """# Performance

Written by `make bench` (benchmarks/bench.py; `make bench ARGS=--quick` or `make bench-quick` for a
smoke run): every figure against a baseline measured in the same run, interleaved, medians.

"""
NOTES = """
## Notes

- **Warm runner** (`--ansible-runner=warm`, the default; docs/ansible.md "Warm execution"): each run
  is a fork of a zygote that has ansible-core imported and ansible.builtin's routing table parsed
  (376 kB of YAML, ~250 ms of every cold run). Role runs are given to ansible-runner as a play, so that
  every run of a role has the same environment and finds the same zygote. Parsing the inventory and
  playbook, loading plugins and running the tasks are unchanged.
- **Fact gathering** is off unless a play asks (`ANSIBLE_GATHERING=explicit` by default); the naive
  baseline uses the same setting, so skipping facts does not count in the ratios.
- **No pty close delay**: ansible-runner's pexpect child is closed without pexpect's fixed 100 ms sleep
  (both runner modes).
- **Warm modules** (`--ansible-runner=warm`; docs/ansible.md "Warm modules"): a warm run's modules
  run in forks of an interpreter that has imported the Kubernetes client and its libraries, one per
  module environment; the run's own kubeconfig (`KUBECONFIG`, which the client also reads at import)
  is set in each fork and read again, and nothing of ansible-core is preloaded, so each module imports
  its `module_utils` from its own payload and keeps no state between tasks. What is left of a
  `kubernetes.core.k8s` task is the module's own work (its payload's imports, discovery, the request)
  and the playbook's side: ansible-core builds the module's AnsiballZ payload again in every run (its
  cache is keyed by module name only and lives in the run's temporary directory) and forks the task's
  worker. The two end-to-end create → Successful rows alone (`make bench-sequential`,
  10 CRs each, interleaved with naive runs), 2026-12-02 on the 2-core machine: the one-`k8s`-task role
  0.41x naive (0.759 s vs 1.865 s) with warm modules, 0.65x (1.002 s vs 1.552 s) on the commit before
  them, run minutes apart; the one-task role (no module process) 0.24x and 0.25x.
- The end-to-end rows (`benchmarks/bench_e2e.py`) run the operator with its default flags
  (`--ansible-runner warm`, concurrency = CPU count, `--ansible-verbosity 2`) against the embedded
  cluster; times are from the create request to the watch event showing `Successful=True`. The
  naive baseline of those rows is the same role as a playbook in a fresh `ansible-runner run`
  (same `ANSIBLE_GATHERING`, the same cluster through `KUBECONFIG`). When a row says
  "N naive serial runs x k", only N naive runs were measured and their sum scaled.
- Peak memory of a process tree is given as summed RSS (a page shared by forked processes counts once
  per process) and, where measured, as summed PSS (each shared page divided among its sharers: the
  memory the tree holds).
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke test, not a measurement")
    parser.add_argument("--output", type=Path, default=None, help="also write the table to this markdown file")
    parser.add_argument("--only", choices=["sequential"], default=None,
                        help="sequential: only the two end-to-end CR create -> Successful rows (10 CRs each, "
                             "--quick: 1), printed and never written to --output (minutes, not half an hour)")
    args = parser.parse_args(argv)
    if args.only is not None and args.output is not None:
        parser.error("--only prints a part of the table; it cannot replace the --output document")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hybrid-bench-") as directory:
        os.environ.setdefault("HOME", directory)
        if args.only == "sequential":
            rows = bench_e2e.measure_sequential(Path(directory), 1 if args.quick else 10)
        else:
            rows = asyncio.run(measure(args.quick, Path(directory)))
    text = render(rows, args.quick, time.monotonic() - started)
    print(text)
    if args.output is not None:
        args.output.write_text(HEADER + text + NOTES)
    return 0


if __name__ == "__main__":
    sys.exit(main())

