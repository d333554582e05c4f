"""``make chaos``: fault injection against the operator and the embedded cluster, and the figures.

Why it exists: issue 13 asks what happens to a user's resources when things break -- the operator
killed mid-playbook or mid-helm, the cluster killed mid-burst, the API unreachable, writers fighting
over one resource, a storm of child events, a long soak, two operators wanting one release name --
and wants the answer as figures, not adjectives. Each scenario (``chaoslib/scenarios.py``) runs a
bounded number of tries against real processes on 127.0.0.1 and reports one table row: tries,
survived, writes lost, work duplicated, the longest time to converge after the fault, notes.

``--quick`` (CI's smoke run) does fewer, shorter tries; ``--jobs 2`` runs two scenarios at a time (each
has its own cluster, operator, ports and directories, and most of a scenario is waiting: the smoke run
in ``make test`` uses it; the full run keeps one at a time, so that its figures are not shared with
another scenario's load). The table keeps the scenarios' order. The table is printed and, with
``--output``, written into ``docs/reliability.md`` between its markers, with the machine it ran
on. Exit code 1 when anything was lost, duplicated or never converged.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from chaoslib.scenarios import SCENARIOS, Context, Row

REPO = Path(__file__).resolve().parent.parent
BEGIN = "<!-- chaos:begin -->"
END = "<!-- chaos:end -->"


def machine_facts() -> list[str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    memory = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), "0")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO,
                            check=False).stdout.strip()
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    return [f"- CPU: {cpu}, nproc: {os.cpu_count()}, memory: {int(memory) // 1024} MiB",
            f"- load average at the end (1/5/15 min): {load} (other work shares the machine)",
            f"- Python: {platform.python_version()}, {platform.system()} {platform.release()}",
            f"- commit: {commit or 'unknown'}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]


def table(rows: list[Row]) -> list[str]:
    lines = ["| scenario | tries | survived | writes lost | work duplicated | max time to converge (s) | notes |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        converge = f"{row.converge:.1f}" if row.converged_all else f"{row.converge:.1f} (not all converged)"
        lines.append(f"| {row.scenario} | {row.tries} | {row.survived} | {row.lost} | {row.duplicated} | "
                     f"{converge} | {row.notes} |")
    return lines


def report(rows: list[Row], quick: bool, elapsed: float, jobs: int = 1) -> str:
    mode = "quick mode (CI smoke run: fewer, shorter tries)" if quick else "full run (`make chaos`)"
    if jobs > 1:
        mode += f", {jobs} scenarios at a time"
    return "\n".join([*table(rows), "", f"{mode}; total time {elapsed:.0f} s on:", *machine_facts()]) + "\n"


def write_doc(path: Path, text: str) -> None:
    document = path.read_text() if path.exists() else f"{BEGIN}\n{END}\n"
    if BEGIN not in document or END not in document:
        document += f"\n{BEGIN}\n{END}\n"
    head, _, rest = document.partition(BEGIN)
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")


def run_one(name: str, context: Context) -> Row:
    """One scenario; one that cannot run is a failed row, not a crash of the suite."""
    scenario = dict(SCENARIOS)[name]
    started = time.monotonic()
    print(f"chaos: {name} ...", file=sys.stderr, flush=True)
    try:
        row = scenario(context)
    except Exception as exc:
        traceback.print_exc()
        row = Row(name, notes=f"could not run: {type(exc).__name__}: {exc}", converged_all=False)
    print(f"chaos: {name} done in {time.monotonic() - started:.0f} s: {row}", file=sys.stderr, flush=True)
    return row


def run(selected: list[str], quick: bool, workdir: Path, soak_seconds: float | None = None, jobs: int = 1) -> list[Row]:
    context = Context(workdir, quick, soak_seconds)
    names = [name for name, _ in SCENARIOS if not selected or name in selected]
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="chaos") as pool:
        return list(pool.map(lambda name: run_one(name, context), names))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter tries (CI smoke run)")
    parser.add_argument("--output", type=Path, help="write the table into this Markdown file, between its markers")
    parser.add_argument("--scenario", action="append", default=[],
                        choices=[name for name, _ in SCENARIOS], help="run only these (repeatable)")
    parser.add_argument("--soak-seconds", type=float, help="the soak's time budget (default 420, quick 60)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="scenarios run at a time (default 1; the smoke run in make test uses 2)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (logs) for a look")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="hybrid-chaos-"))
    try:
        rows = run(args.scenario, args.quick, workdir, args.soak_seconds, args.jobs)
    finally:
        if args.keep:
            print(f"chaos: working directory kept: {workdir}", file=sys.stderr)
        else:
            subprocess.run(["rm", "-rf", str(workdir)], check=False)
    text = report(rows, args.quick, time.monotonic() - started, args.jobs)
    print(text)
    if args.output is not None:
        write_doc(args.output, text)
    failed = any(row.lost or row.duplicated or not row.converged_all or row.tries == 0 for row in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
