"""Where each Ansible run's kubeconfig (the ownership proxy's token for that run) lives, and for how long.

Every run gets a directory of its own under ``<artifacts dir>/run-credentials/``, with a random
name, created with mode 0700, holding one ``kubeconfig`` created with mode 0600 (``os.open`` with
that mode, never a chmod after writing). The directory goes when the run ends, whatever the
outcome, and :func:`sweep` removes what a killed operator left behind when the next one starts.

What the token in it can do is the proxy's business (:mod:`hybrid_operator.ansible.proxy`): it is
accepted only while its run lasts, and only on behalf of the one custom resource that run reconciles.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

log = logging.getLogger(__name__)

#: under the operator's artifacts directory
DIRECTORY = "run-credentials"
#: where earlier versions kept every run's kubeconfig side by side (swept too)
LEGACY_DIRECTORY = "kubeconfigs"
KUBECONFIG = "kubeconfig"


def root(artifacts_dir: Path) -> Path:
    """The directory holding every live run's credentials directory."""
    return artifacts_dir / DIRECTORY


def private_dir(path: Path, *, tighten: bool = True) -> Path:
    """Create ``path`` (and missing parents) with mode 0700. An existing directory that others may
    enter is tightened to 0700 (``tighten``), else only reported in the log. A symbolic link is
    refused (OSError): what the operator keeps here never goes where a link points."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.is_symlink():
        raise OSError(errno.ELOOP, f"{path} is a symbolic link; the operator does not write through links")
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        if tighten:
            path.chmod(0o700)
        else:
            log.warning("directory readable by other users", extra={"directory": str(path), "mode": oct(mode)})
    return path


def write_secret(path: Path, text: str) -> Path:
    """Write ``text`` into a new file created with mode 0600 (it must not exist yet)."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


@contextlib.asynccontextmanager
async def run_kubeconfig(artifacts_dir: Path, text: str) -> AsyncIterator[Path]:
    """A 0600 ``kubeconfig`` holding ``text`` in a fresh 0700 directory; both are removed on exit.

    Made and removed in a thread: file system calls never hold up the event loop (a slow or full disk
    would otherwise stall every other reconcile and watch of the operator)."""
    path = await asyncio.to_thread(_new_kubeconfig, artifacts_dir, text)
    try:
        yield path
    finally:
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, path.parent, True))


def _new_kubeconfig(artifacts_dir: Path, text: str) -> Path:
    directory = private_dir(root(artifacts_dir)) / secrets.token_hex(16)
    directory.mkdir(mode=0o700)
    try:
        return write_secret(directory / KUBECONFIG, text)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def remove_entry(entry: Path) -> None:
    """Remove a file or a directory tree; a symbolic link is removed itself, never what it points to."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            entry.unlink()


def sweep(artifacts_dir: Path) -> int:
    """Remove every run credentials directory left by an operator that did not end cleanly.

    Call it at startup, before any run; returns how many were removed.
    """
    remove_entry(artifacts_dir / LEGACY_DIRECTORY)
    directory = root(artifacts_dir)
    if directory.is_symlink():  # never followed: only the link goes
        directory.unlink()
        return 0
    if not directory.is_dir():
        return 0
    removed = 0
    for entry in directory.iterdir():
        remove_entry(entry)
        removed += 1
    if removed:
        log.info("removed run credentials left by an earlier operator", extra={"count": removed,
                                                                            "directory": str(directory)})
    return removed
