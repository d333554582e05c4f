"""Why this module exists: a Ctrl-C in the terminal must stop `hybrid-operator up`, not `make` above it.

A terminal sends SIGINT to every process of its *foreground process group*. Under `make run`, that
group holds `make` and `up`: make then reports "Interrupt" and exits 2 whatever `up` did, although
`up` stops the operator and the cluster cleanly and exits 0. A shell with job control solves the same
problem for its jobs by giving each its own process group and handing it the terminal; `up` does the
same for itself while it runs:

* only when one of stdin/stdout/stderr is a terminal whose foreground group is ours, and only when
  we do not lead that group already (run from a shell, `up` leads its own job and nothing changes);
* `up` moves into a process group of its own and makes it the terminal's foreground group, so
  Ctrl-C reaches `up` (and the children in its group) alone, and make sees `up`'s exit code;
* on the way out the terminal goes back to the group it came from, so the shell finds its terminal
  as it left it. If `up` dies without that, the shell takes its terminal back when `make` ends, as
  it does after every job.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator

log = logging.getLogger(__name__)


def _terminal_fd() -> int | None:
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        if os.isatty(fd):
            return fd
    return None


def _set_foreground(fd: int, group: int) -> None:
    """``tcsetpgrp`` from what may be a background group: SIGTTOU would stop us, so it is ignored meanwhile."""
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, group)
    finally:
        signal.signal(signal.SIGTTOU, previous)


@contextlib.contextmanager
def own_foreground() -> Iterator[bool]:
    """Hold the terminal's foreground in a process group of our own; yields whether it did."""
    fd = _terminal_fd()
    if fd is None:
        yield False
        return
    try:
        original = os.getpgrp()
        if os.tcgetpgrp(fd) != original or original == os.getpid():
            yield False
            return
        os.setpgid(0, 0)
    except OSError as exc:
        log.debug("terminal foreground not taken", extra={"error": str(exc)})
        yield False
        return
    try:
        _set_foreground(fd, os.getpgrp())
    except OSError as exc:
        # back into the foreground group, or a Ctrl-C would reach make and not us
        os.setpgid(0, original)
        log.debug("terminal foreground not taken", extra={"error": str(exc)})
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            _set_foreground(fd, original)
