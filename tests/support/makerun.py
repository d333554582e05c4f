"""`make run` as a user starts it: a process group of its own, its output in a file, stopped with SIGINT.

`make` runs `hybrid-operator up`; a Ctrl-C in a terminal reaches both, and make then reports
"Interrupt" whatever its recipe did. The tests send SIGINT to `up` alone (what make forwards no
differently) so that make's exit code is up's own.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

from support.operator import wait_for


class MakeRun:
    """``make run ARGS=...`` in ``project``, with its stdout and stderr in ``project/make-run.log``."""

    def __init__(self, project: Path, args: str, env: dict[str, str], *make_flags: str) -> None:
        self.project = project
        self.log_path = project / "make-run.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(["make", "--no-print-directory", *make_flags, "run", f"ARGS={args}"],
                                            cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def printed(self, pattern: str) -> str:
        """The first match of ``pattern`` in the output (waits for it; fails if make exits first)."""
        def found() -> str | None:
            match = re.search(pattern, self.output())
            if match is None and self.process.poll() is not None:
                raise AssertionError(f"make run exited with {self.process.returncode}:\\n{self.output()[-4000:]}")
            return match.group(0) if match else None
        return str(wait_for(found, f"{pattern!r} in the output of make run", timeout=180))

    def up_pid(self) -> int:
        """The pid of `hybrid-operator up`, make's child."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        assert children, f"make has no child:\\n{self.output()[-3000:]}"
        return int(children[0])

    def interrupt(self, timeout: float = 120) -> int:
        """SIGINT to `up`; make's exit code once everything stopped."""
        os.kill(self.up_pid(), signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise

    def kill(self) -> None:
        """Cleanup after a failed test: SIGTERM to make and everything it started (the cluster has a
        session of its own, so not the group), SIGKILL to what is left after 30 s."""
        if self.process.poll() is not None:
            return
        pids = self._descendants(self.process.pid)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    @staticmethod
    def _descendants(pid: int) -> list[int]:
        try:
            children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            return [pid]
        return [d for child in children for d in MakeRun._descendants(child)] + [pid]
