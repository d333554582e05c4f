"""What a starting operator clears away first: what an operator that did not end cleanly left behind.

Why this module exists: a ``kill -9`` (an OOM kill, a node loss, a pod deleted with
``--grace-period=0``) gives the operator no chance to clean up, and every leftover either costs
something or races the next operator (issue 13 item 6):

* helm and ``ansible-playbook`` processes still running for the dead operator
  (:func:`hybrid_operator.processes.kill_leftovers`);
* per-run kubeconfigs holding a run token (:func:`hybrid_operator.ansible.credentials.sweep`);
* the scratch directory (:data:`SCRATCH`): the private data directories of runs, which hold the
  resource's spec as extra vars, and the kubernetes client's temporary CA and client key files;
* the artifact directories of resources deleted while no operator ran (the next run of a resource
  removes its own when it finds the resource gone; nobody reconciles a resource that is gone).

All of it lives under the artifacts directory, which several operator processes may share (two
replicas on one host, a test starting a standby next to a leader). So each process holds a lock on
``<artifacts>/.operator.lock`` for as long as it runs, shared; the sweep runs only when the starting
process can take it exclusively, that is when no other live operator uses the directory, so nothing
it removes or kills can belong to a live one.  Artifact directories are removed only below the
``<group>/<version>/<kind>/<namespace>/`` of this operator's own Ansible kinds, in the namespaces it
watches, only for resources the API server says do not exist, and never through a symbolic link.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import secrets
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

from hybrid_operator import errors, processes
from hybrid_operator.ansible import artifacts, credentials
from hybrid_operator.config.model import AnsibleWatch, Watch
from hybrid_operator.kube.client import ClusterClient

log = logging.getLogger(__name__)

LOCK_FILE = ".operator.lock"
#: per-process temporary files (run private data dirs, the kubernetes client's CA/key files)
SCRATCH = "tmp"


class ArtifactsLock:
    """This process's hold on an artifacts directory (released when the process ends, however)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd = _open_lock(directory)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.alone = True
        except BlockingIOError:
            self.alone = False

    def share(self) -> None:
        """From now on others may use the directory too (they will not sweep while we live)."""
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def close(self) -> None:
        os.close(self._fd)


def _open_lock(directory: Path) -> int:
    """The lock file's descriptor: never through a symbolic link, and never a file of another user.

    A new lock file is made under a temporary name, locked, then linked into place, so that nobody
    (the sweep of :mod:`hybrid_operator.manager.privatedir`) finds it unlocked meanwhile. A lock file
    that is a link, or belongs to another user (left from when the directory was open to others), is
    replaced: whoever holds a lock on it then no longer holds up this operator.
    """
    path = directory / LOCK_FILE
    # O_CLOEXEC: a child (helm, ansible-playbook) must never keep the lock after we die
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(3):
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            fresh = _new_lock(path)
            if fresh is not None:
                return fresh
            continue
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            path.unlink()
            continue
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and stat.S_ISREG(info.st_mode):
            return fd
        os.close(fd)
        log.warning("replaced a lock file that belonged to another user",
                    extra={"file": str(path), "uid": info.st_uid})
        path.unlink()
    raise OSError(errno.EAGAIN, f"cannot make the lock file {path}: it keeps being replaced")


def _new_lock(path: Path) -> int | None:
    """A fresh lock file at ``path``, already locked (None when another process made one first)."""
    temporary = path.with_name(f"{path.name}.{secrets.token_hex(8)}")
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.link(temporary, path)
        except FileExistsError:
            os.close(fd)
            return None
        return fd
    finally:
        temporary.unlink(missing_ok=True)


def scratch_dir(artifacts_dir: Path) -> Path:
    return artifacts_dir / SCRATCH


def sweep_local(lock: ArtifactsLock) -> None:
    """Stop leftover processes, remove run credentials and scratch files (only when ``lock.alone``)."""
    directory = lock.directory
    if not lock.alone:
        log.info("another operator uses the artifacts directory: leftovers are not swept",
                 extra={"directory": str(directory)})
        return
    processes.kill_leftovers(processes.scope_of(directory))
    credentials.sweep(directory)
    scratch = scratch_dir(directory)
    if scratch.is_symlink():  # never followed: only the link goes
        scratch.unlink()
    elif scratch.is_dir():
        leftover = list(scratch.iterdir())
        for entry in leftover:
            credentials.remove_entry(entry)
        if leftover:
            log.info("removed temporary files left by an earlier operator",
                     extra={"count": len(leftover), "directory": str(scratch)})
    credentials.private_dir(scratch)


def sweep_artifacts(cluster: ClusterClient, watches: Sequence[Watch], root: Path,
                    namespaces: Sequence[str]) -> list[Path]:
    """Remove the artifact directories of resources that no longer exist; the removed directories.

    Lists every resource of each Ansible kind first; a kind that cannot be listed is skipped (the
    API server is down, the CRD is not installed yet): nothing is removed on a guess.
    """
    removed: list[Path] = []
    for watch in watches:
        if not isinstance(watch, AnsibleWatch):
            continue
        gvk = watch.gvk
        try:
            ref = cluster.resolve(gvk.group, gvk.version, gvk.kind)
            scopes = list(namespaces) if ref.namespaced and namespaces else [""]
            existing = {(str(obj["metadata"].get("namespace") or ""), str(obj["metadata"].get("name") or ""))
                        for scope in scopes for obj in cluster.list(ref, scope)}
        except errors.TemporaryError as exc:
            log.info("artifacts of deleted resources not swept", extra={"kind": gvk.kind, "error": str(exc)})
            continue
        kind_dir = artifacts.cr_dir(root, gvk, "_", "_").parent.parent
        allowed = set(namespaces) if ref.namespaced and namespaces else None
        if _real_below(root, kind_dir):
            removed += _orphans(kind_dir, existing, allowed, ref.namespaced)
    if removed:
        log.info("removed artifacts of resources deleted while no operator ran", extra={"count": len(removed)})
    return removed


def _orphans(kind_dir: Path, existing: set[tuple[str, str]], namespaces: set[str] | None,
             namespaced: bool) -> list[Path]:
    removed: list[Path] = []
    if not _real_dir(kind_dir):
        return removed
    for namespace_dir in kind_dir.iterdir():
        namespace = "" if namespace_dir.name == artifacts.CLUSTER_SCOPE_DIR else namespace_dir.name
        if not _real_dir(namespace_dir) or (namespace == "") == namespaced:
            continue
        if namespaces is not None and namespace not in namespaces:
            continue
        for cr_dir in namespace_dir.iterdir():
            if _real_dir(cr_dir) and (namespace, cr_dir.name) not in existing and _only_artifacts(cr_dir):
                shutil.rmtree(cr_dir, ignore_errors=True)
                removed.append(cr_dir)
        with contextlib.suppress(OSError):
            namespace_dir.rmdir()  # only when empty now
    return removed


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _real_below(root: Path, path: Path) -> bool:
    """``path`` and every directory between ``root`` and it are real directories (no link is followed)."""
    return all(_real_dir(directory) for directory in (path, *path.parents) if root in directory.parents)


def _only_artifacts(cr_dir: Path) -> bool:
    """Laid out as the runner lays a resource's directory out: nothing but ``artifacts/``."""
    return [entry.name for entry in cr_dir.iterdir()] == [artifacts.ARTIFACTS_DIR]
