"""The server's files on disk: private from the moment they exist, and never seen half-written.

The data dir holds the admin token (in ``state.db``) and every Secret, so it
is ``0700`` and everything secret in it is ``0600`` -- *created* with that
mode (``os.open`` with a mode, or a umask around SQLite's own file creation),
never made and then ``chmod``-ed, which would leave a window in which another
user could open it.  A data dir made by an older version with looser modes is
tightened when the server starts.

A client may read the kubeconfig while the server rewrites it, and a server
killed mid-write must not leave a truncated key behind: each file is written
to a temporary sibling created with its final mode, then renamed over the old one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def write_atomically(path: Path, data: str | bytes, mode: int = PRIVATE_FILE) -> None:
    """Write ``path`` whole, via a sibling created with ``mode`` and renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.parent / f".{path.name}.{secrets.token_hex(6)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def private_dir(path: Path) -> None:
    """``path`` as a ``0700`` directory: created so, or tightened when it already exists looser."""
    with private_umask():
        path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    tighten(path, PRIVATE_DIR)


def tighten(path: Path, mode: int) -> None:
    """Remove every permission bit of an existing ``path`` that ``mode`` does not grant."""
    try:
        current = stat.S_IMODE(path.lstat().st_mode)
    except FileNotFoundError:
        return
    if current & ~mode:
        os.chmod(path, current & mode)


def create_private(path: Path) -> None:
    """Create an empty ``0600`` file at ``path`` unless one exists (then tighten it)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)
    except FileExistsError:
        tighten(path, PRIVATE_FILE)
        return
    os.close(fd)


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Files and directories created inside get no group or other permission (umask 077).

    For files whose creation we do not control (SQLite's ``-wal`` and ``-shm``);
    the umask is process-wide, so this is used only while the server starts,
    before any other thread runs.
    """
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)
