"""`make run` as a user starts it: in a terminal of its own, its output in a file, stopped with Ctrl-C.

`make` runs `hybrid-operator up` in a new session whose controlling terminal is a pseudo-terminal
(`setsid -c`, stdin on the terminal), as a shell starts a job. :meth:`MakeRun.interrupt` types
Ctrl-C on that terminal: the line discipline sends SIGINT to the terminal's foreground process group,
exactly as for a user. `up` holds that foreground itself (``hybrid_operator.cli.terminal``), so make's
exit code is up's own.
"""

from __future__ import annotations

import contextlib
import os
import pty
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
        self.controller, terminal = pty.openpty()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(["setsid", "-c", "make", "--no-print-directory", *make_flags, "run",
                                             f"ARGS={args}"],
                                            cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=terminal)
        os.close(terminal)

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
        """Ctrl-C typed on make's terminal; make's exit code once everything stopped."""
        self.up_pid()  # make has started `up` (fails with the output otherwise)
        os.write(self.controller, b"\x03")
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise
        finally:
            self._close_terminal()

    def _close_terminal(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.controller)

    def kill(self) -> None:
        """Cleanup after a failed test: SIGTERM to make and everything it started (the cluster has a
        session of its own, so not the group), SIGKILL to what is left after 30 s."""
        if self.process.poll() is not None:
            self._close_terminal()
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
        self._close_terminal()

    @staticmethod
    def _descendants(pid: int) -> list[int]:
        try:
            children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            return [pid]
        return [d for child in children for d in MakeRun._descendants(child)] + [pid]
