"""Where one operator process keeps its files: a directory no other local user can reach or swap.

Why this module exists: the artifacts directory holds the kubeconfig helm uses, every run's
credentials, job events and the run's scratch files. Its old default, ``/tmp/hybrid-operator/runner``,
was one fixed path for every operator and every user of the machine (issue 28 item 5): another
user who made it first (mode 0777) could swap the kubeconfig for one with an exec plugin, hold its
lock file to stop every start, or make it a symbolic link into a victim's home for the startup
sweep to empty; and two operators for two clusters rewrote each other's kubeconfig, so one
operator's helm installed releases into the other's cluster.

So:

* **The default is a new directory for each process** (:func:`claim` with no path): ``mkdtemp``
  (mode 0700, a random name, made atomically) named ``hybrid-operator-run-<pid>-<random>`` under
  the first usable of ``$XDG_RUNTIME_DIR``, ``${XDG_CACHE_HOME:-~/.cache}/hybrid-operator`` and the
  system's temporary directory. A second operator gets a directory of its own. The directory goes
  when the process ends normally; the leftovers of processes that were killed (their lock is free)
  are removed, with the processes they left, by the next operator that uses the same parent.
* **A directory given with ``--artifacts-dir`` is checked, not trusted:** if it exists it must be
  a real directory (not a symbolic link), owned by this user and writable by nobody else; every
  directory above it must be owned by this user or root and writable by nobody else unless it has
  the sticky bit (as ``/tmp`` has), and every symbolic link on the way must be owned by this user or
  root. Anything else stops the start with a :class:`UnsafeDirectory` (exit 2) naming the path and
  what to do. Missing directories are created with mode 0700.

Nothing here follows a symbolic link it did not check: directories are created with ``mkdir``
(which never follows a link in the last component) and checked with ``lstat`` afterwards, and
trees are removed with :func:`shutil.rmtree`, which on Linux removes a link and never what it
points to.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from hybrid_operator import errors, processes

log = logging.getLogger(__name__)

#: the name of every per-process directory starts so: ``hybrid-operator-run-<pid>-<random>``
RUN_PREFIX = "hybrid-operator-run-"
#: under ``${XDG_CACHE_HOME:-~/.cache}``
CACHE_DIR = "hybrid-operator"
LOCK_FILE = ".operator.lock"
#: a per-process directory without its lock file is one whose process died while making it (or is
#: making it right now): removed only when older than this
_UNLOCKED_GRACE_SECONDS = 3600.0


class UnsafeDirectory(errors.ConfigurationError):
    """A directory another local user could reach or swap: the operator does not start (exit 2)."""


@dataclass
class Claim:
    """The artifacts directory of this process, and whether it is this process's alone (removed at exit)."""

    directory: Path
    temporary: bool

    def release(self) -> None:
        """Remove a per-process directory (a directory given with ``--artifacts-dir`` stays)."""
        if self.temporary:
            shutil.rmtree(self.directory, ignore_errors=True)


def claim(requested: Path | None, environ: Mapping[str, str]) -> Claim:
    """The artifacts directory to use: ``requested`` once checked, else a new private one for this process.

    Raises :class:`UnsafeDirectory` when ``requested`` (or a directory above it) is not safe from other
    users, or when no private place can be made.
    """
    if requested is not None:
        make_private_dir(requested)
        return Claim(requested, temporary=False)
    problems = []
    parents = candidate_parents(environ)
    for parent in parents:
        try:
            usable = _usable_parent(parent, last_resort=parent == parents[-1])
        except (UnsafeDirectory, OSError) as exc:
            problems.append(f"{parent}: {exc}")
            continue
        sweep_dead(usable)
        directory = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=usable))
        log.info("artifacts directory", extra={"directory": str(directory)})
        return Claim(directory, temporary=True)
    raise UnsafeDirectory("no private place for the artifacts directory: " + "; ".join(problems)
                          + "; give one with --artifacts-dir")


def candidate_parents(environ: Mapping[str, str]) -> list[Path]:
    """Where a per-process directory may go, best first: the runtime directory, the cache, the temp dir."""
    parents = []
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and Path(runtime).is_absolute():
        parents.append(Path(runtime))
    cache = environ.get("XDG_CACHE_HOME", "")
    home = environ.get("HOME", "")
    if cache and Path(cache).is_absolute():
        parents.append(Path(cache) / CACHE_DIR)
    elif home and Path(home).is_absolute():
        parents.append(Path(home) / ".cache" / CACHE_DIR)
    parents.append(Path(tempfile.gettempdir()))
    return parents


def _usable_parent(parent: Path, *, last_resort: bool = False) -> Path:
    """``parent`` once it is safe to make private directories in: a shared sticky directory such as
    ``/tmp`` as it is, another directory created (0700) when missing and checked to be ours alone.

    ``last_resort`` (the system's temporary directory, when nothing else is usable): a root-owned
    one that everyone may write *without* the sticky bit is used too, with a warning. That is what a
    pod's ``emptyDir`` is (mode 0777), and in a pod with a read-only root file system it is the only
    writable place; a machine's ``/tmp`` has the sticky bit.
    """
    parent = Path(os.path.abspath(parent))
    if parent.exists() and _shared(parent, sticky=True):
        check_ancestors(parent / "x")
        return parent
    if last_resort and parent.exists() and _shared(parent, sticky=False):
        check_ancestors(parent)
        log.warning("the temporary directory is writable by everyone and has no sticky bit (as a pod's "
                    "emptyDir): another user of this machine could move the operator's directory; set "
                    "XDG_RUNTIME_DIR to a directory of the operator's user alone to avoid it",
                    extra={"directory": str(parent)})
        return parent
    make_private_dir(parent)
    return parent


def _shared(path: Path, *, sticky: bool) -> bool:
    """A root-owned directory everyone may write, with the sticky bit (or, ``sticky`` False, without)."""
    info = os.lstat(path)
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and info.st_mode & 0o002 != 0
            and bool(info.st_mode & stat.S_ISVTX) == sticky)


def make_private_dir(path: Path) -> Path:
    """``path`` as a directory of this user's alone: checked, and the missing part created with mode 0700.

    Raises :class:`UnsafeDirectory` naming the first problem; a directory readable (not writable) by
    others is only reported in the log, as before.
    """
    path = Path(os.path.abspath(path))
    check_ancestors(path)
    missing = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile: checked below like any other
            os.mkdir(directory, 0o700)
        check_own_dir(directory)
    check_own_dir(path)
    mode = os.lstat(path).st_mode & 0o777
    if mode & 0o044:
        log.warning("directory readable by other users", extra={"directory": str(path), "mode": oct(mode)})
    return path


def check_own_dir(path: Path) -> None:
    """``path`` is a real directory (no symbolic link), owned by this user, writable by nobody else."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise UnsafeDirectory(f"{path}: {exc.strerror}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeDirectory(f"{path} is a symbolic link: another user could point it anywhere; give the "
                              "real directory, or another --artifacts-dir")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeDirectory(f"{path} exists and is not a directory; choose another --artifacts-dir")
    if info.st_uid != os.geteuid():
        raise UnsafeDirectory(f"{path} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()}): "
                              "its owner could replace what the operator writes there; choose another "
                              "--artifacts-dir")
    if info.st_mode & 0o022:
        raise UnsafeDirectory(f"{path} is writable by other users (mode {oct(info.st_mode & 0o7777)}): they "
                              f"could replace what the operator writes there; run chmod 700 {path}, or "
                              "choose another --artifacts-dir")


def check_ancestors(path: Path) -> None:
    """Every directory above ``path`` is out of other users' reach, and so is every link on the way.

    A directory above must be owned by this user or root and writable by nobody else unless it has
    the sticky bit (then others cannot rename or remove what is ours in it); a symbolic link on the
    way must be owned by this user or root. The directories a link leads through are checked too.
    """
    me = os.geteuid()
    seen: set[Path] = set()
    for prefix in _prefixes(path)[:-1]:
        try:
            info = os.lstat(prefix)
        except FileNotFoundError:
            return  # what follows is made by us
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in (0, me):
            raise UnsafeDirectory(f"{prefix} is a symbolic link owned by uid {info.st_uid}, another user: they "
                                  "could point it anywhere; choose another --artifacts-dir")
        for directory in _prefixes(Path(os.path.realpath(prefix))):
            if directory not in seen:
                seen.add(directory)
                _check_above(directory, me)


def _check_above(directory: Path, me: int) -> None:
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeDirectory(f"{directory} changed into a symbolic link while it was checked")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeDirectory(f"{directory} is not a directory")
    if info.st_uid not in (0, me):
        raise UnsafeDirectory(f"{directory} belongs to uid {info.st_uid}, another user: they could move what is "
                              "below it; choose an --artifacts-dir under directories of your own")
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise UnsafeDirectory(f"{directory} is writable by other users (mode {oct(info.st_mode & 0o7777)}) "
                              "without the sticky bit: they could move what is below it; choose an "
                              "--artifacts-dir under directories of your own")


def _prefixes(path: Path) -> list[Path]:
    """``/a/b/c`` -> ``[/, /a, /a/b, /a/b/c]``."""
    parts = Path(os.path.abspath(path)).parts
    return [Path(*parts[:index]) for index in range(1, len(parts) + 1)]


# -- the leftovers of killed operators --------------------------------------------------------------


def sweep_dead(parent: Path) -> list[Path]:
    """Remove the per-process directories under ``parent`` whose operator is gone, and the processes
    it left running. Only this user's real directories (never a link), and only when their lock is free.
    """
    removed = []
    for directory in _run_dirs(parent):
        with _held_if_dead(directory) as dead:
            if not dead:
                continue
            processes.kill_leftovers(processes.scope_of(directory))
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    if removed:
        log.info("removed the directories of operators that did not end cleanly",
                 extra={"count": len(removed), "directory": str(parent)})
    return removed


def _run_dirs(parent: Path) -> Iterator[Path]:
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(RUN_PREFIX):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
            yield Path(entry.path)


@contextlib.contextmanager
def _held_if_dead(directory: Path) -> Iterator[bool]:
    """True (holding its lock meanwhile) when no live process holds ``directory``'s lock."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        try:
            age = time.time() - os.lstat(directory).st_mtime
        except OSError:
            age = 0.0
        yield age > _UNLOCKED_GRACE_SECONDS
        return
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
