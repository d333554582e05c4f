"""Child processes that do not outlive the operator: a parent-death signal, and a sweep at startup.

Why this module exists: helm and ``ansible-playbook`` run as child processes in sessions of their
own (so a terminal's Ctrl-C reaches only the operator, which stops them in order). A child in its
own session survives a ``kill -9`` of the operator, and a surviving helm races the next operator
for the same release (issue 13 item 2). Two mechanisms close that, each covering what the other
cannot:

* :func:`parent_death_signal` -- a ``preexec_fn`` asking Linux (``prctl(PR_SET_PDEATHSIG)``) to
  send the child a signal when the operator dies, ``kill -9`` included. Used for helm and the warm
  Ansible worker, whose processes the operator starts itself; :func:`die_with_parent` is the same
  request for a process forked without ``subprocess`` (the worker's zygotes, a playbook's pty child).
* :func:`marker` and :func:`kill_leftovers` -- every child gets the environment variable
  :data:`MARKER_ENV` naming its operator's *scope* (a digest of the artifacts directory), and
  inherits it into its own children. At startup, once the operator knows that no other live
  operator shares its artifacts directory, every process still carrying its scope is a leftover
  of a dead predecessor and is killed. This covers ``ansible-playbook`` (ansible-runner starts it
  through pexpect, which takes no ``preexec_fn``), its forks, and anything the signal missed.

Both are Linux facilities; elsewhere the signal is not set and the sweep finds nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import logging
import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

#: set in every child's environment: the scope of the operator that started it
MARKER_ENV = "HYBRID_OPERATOR_SCOPE"
#: ``prctl`` option number of PR_SET_PDEATHSIG (linux/prctl.h)
_PR_SET_PDEATHSIG = 1
PROC = Path("/proc")


def scope_of(directory: Path) -> str:
    """The scope of the operator using ``directory`` (its artifacts directory): a short digest."""
    return hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:24]


def marker(scope: str) -> dict[str, str]:
    """The environment entries that tie a child (and its children) to the operator of ``scope``."""
    return {MARKER_ENV: scope}


def _prctl() -> Callable[..., int] | None:
    if not PROC.is_dir():
        return None
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    function = getattr(libc, "prctl", None)
    return function if callable(function) else None


_PRCTL = _prctl()


def parent_death_signal(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` making the child receive ``sig`` when its parent dies; None where unsupported.

    The kernel ties the signal to the *thread* that forked, so start the child from a thread that
    lives as long as the operator (the event loop's). The parent may already be gone when the child
    sets the signal: then the child exits at once instead of running as an orphan.

    SIGKILL by default: helm v4 answers SIGTERM by cancelling, but went on applying objects for
    13 s (a loaded machine, a 150-object chart) before it exited -- the race with the next operator
    this is meant to end. A release left ``pending-*`` is recovered by the next operator.
    """
    if _PRCTL is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        die_with_parent(parent, sig)

    return preexec


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> bool:
    """In a process just forked from ``parent`` (its pid, read *before* the fork): get ``sig`` when it dies.

    For children the operator's helpers fork themselves (the warm Ansible worker's zygotes and
    playbooks), where no ``preexec_fn`` applies. Exits at once (status 1) when ``parent`` is already
    gone, so no orphan starts its work; raises OSError when the kernel refuses the request. False
    where the facility does not exist (not Linux), True when the signal is set.
    """
    if _PRCTL is None:
        return False
    if _PRCTL(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(number)}")
    if os.getppid() != parent:
        os._exit(1)
    return True


def leftovers(scope: str, *, proc: Path = PROC) -> list[int]:
    """Processes of this user whose environment carries ``scope`` (never this process)."""
    wanted = f"{MARKER_ENV}={scope}".encode()
    found = []
    me = os.getpid()
    try:
        entries = list(proc.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environment = (entry / "environ").read_bytes()
        except OSError:  # another user's process, or gone meanwhile
            continue
        if wanted in environment.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def kill_leftovers(scope: str, *, wait: float = 5.0, proc: Path = PROC) -> list[int]:
    """SIGKILL every leftover of ``scope`` and wait (up to ``wait`` s) until they are gone; their pids.

    Call it only when no live operator shares the scope: it kills whatever carries the marker.
    """
    pids = leftovers(scope, proc=proc)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(_alive(pid, proc) for pid in pids):
        time.sleep(0.05)
    if pids:
        log.warning("stopped processes left by an earlier operator", extra={"pids": pids, "count": len(pids)})
    return pids


def sweep_dead_dirs(parent: Path, prefix: str) -> list[Path]:
    """Remove ``<parent>/<prefix><pid>-<anything>`` directories whose process ``<pid>`` is gone: what a
    killed operator could not remove itself. Only this user's real directories (a link is never
    followed), and only where the pid in the name is not running."""
    removed = []
    for path in parent.glob(f"{prefix}*-*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        try:
            info = path.lstat()
            if not pid.isdigit() or alive(int(pid)) or info.st_uid != os.getuid() or not stat.S_ISDIR(info.st_mode):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def wait_or_kill(process: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait up to ``timeout`` seconds for ``process`` to end (it was asked to), then SIGKILL and reap it."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def alive(pid: int, *, proc: Path = PROC) -> bool:
    """Whether ``pid`` is running (a zombie counts as gone)."""
    return _alive(pid, proc)


def _alive(pid: int, proc: Path) -> bool:
    """Still running (a zombie waiting for its parent counts as gone)."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]
