"""What both halves of ``make bench`` measure with: the naive baseline run and process-tree memory.

Why it exists: the in-process runner figures (``bench.py``) and the end-to-end figures through a
running operator (``bench_e2e.py``) must use the *same* baseline (a fresh ``ansible-runner run``
process, with the same ``ANSIBLE_GATHERING``) and the same RSS accounting, or their ratios would
not be comparable. It imports nothing from the operator, so either module can use it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GATHERING = "explicit"


@dataclass(frozen=True)
class Row:
    """One line of the table: a figure, its baseline, both as medians (None: not measured)."""

    figure: str
    value: float | None
    baseline_name: str
    baseline: float | None
    unit: str = "s"
    note: str = ""

    @property
    def ratio(self) -> str:
        if self.value is None or self.baseline is None or self.baseline == 0:
            return "n/a"
        return f"{self.value / self.baseline:.2f}x"


def naive_run(work: Path, playbook: Path, *, roles: Path | None = None, env: Mapping[str, str] | None = None,
              extravars: Mapping[str, Any] | None = None) -> float:
    """A fresh ``ansible-runner run`` process for ``playbook`` (with ``roles`` next to it): wall seconds."""
    private = Path(tempfile.mkdtemp(dir=work))
    (private / "project").mkdir()
    (private / "project" / "site.yml").write_text(playbook.read_text())
    if roles is not None:
        shutil.copytree(roles, private / "project" / "roles")
    (private / "inventory").mkdir()
    inventory = f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    (private / "inventory" / "hosts").write_text(inventory)
    if extravars:
        (private / "env").mkdir()
        (private / "env" / "extravars").write_text(json.dumps(dict(extravars)))
    bin_dir = str(Path(sys.executable).parent)
    full_env = {**os.environ, "ANSIBLE_GATHERING": GATHERING, "ANSIBLE_NOCOLOR": "1",
                "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]), **(env or {})}
    started = time.monotonic()
    subprocess.run([str(Path(sys.executable).parent / "ansible-runner"), "run", str(private), "-p", "site.yml"],
                   env=full_env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.monotonic() - started
    shutil.rmtree(private, ignore_errors=True)
    return elapsed


def tree_rss(root: int) -> dict[int, int]:
    """The RSS in bytes of ``root`` and each of its descendants (by parent pid), from one scan of /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        found[pid] = rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return found


def tree_rss_mib(root: int) -> float:
    """The summed RSS of ``root`` and all its descendants, in MiB: a page shared by forks counts once per process."""
    return sum(tree_rss(root).values()) / 2**20


def pss_mib(pids: Iterable[int]) -> float:
    """The summed PSS of ``pids``, in MiB: each page divided among the processes sharing it, so the total
    is the memory they really hold (forked processes share most pages)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except (OSError, ValueError, IndexError):
            continue
    return total / 2**20


class PeakRss:
    """Samples the RSS of a process tree (default: this process) every ``interval`` s; ``peak`` in MiB
    (``peak_pss``: the same for PSS, with ``pss=True``)."""

    def __init__(self, root: int | None = None, interval: float = 0.05, *, pss: bool = False) -> None:
        self.peak = 0.0
        self.peak_pss = 0.0
        self.pss = pss
        self.root = os.getpid() if root is None else root
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            tree = tree_rss(self.root)
            self.peak = max(self.peak, sum(tree.values()) / 2**20)
            if self.pss:
                self.peak_pss = max(self.peak_pss, pss_mib(tree))
