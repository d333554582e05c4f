"""Per-CR artifact directories: where each run's output goes, how many are kept, and their removal.

Runner artifacts fill disks when nobody prunes them (operator-sdk AOP#47, AOP#231, #4989), and
ansible-runner's own rotation deletes across every run sharing a directory (and the current run's
own directory when an ident is reused). So every CR gets its own directory::

    <root>/<group>/<version>/<kind>/<namespace>/<name>/artifacts/<ident>

(the core group is spelled ``_core``, a cluster-scoped CR's namespace ``_cluster``: neither can
clash with a real group or namespace). Idents start with a UTC timestamp, so their names sort in
creation order; :func:`rotate` keeps the newest ones and never the current run's directory, and
:func:`remove_artifacts` deletes a CR's whole directory when the CR is gone.
"""

from __future__ import annotations

import re
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hybrid_operator import clock
from hybrid_operator.config.model import GroupVersionKind

CORE_GROUP_DIR = "_core"
CLUSTER_SCOPE_DIR = "_cluster"
ARTIFACTS_DIR = "artifacts"
_IDENT = re.compile(r"\d{8}T\d{12}Z-[0-9a-f]{8}")


def new_ident() -> str:
    """A unique run ident whose name sorts by creation time: ``20261130T101500123456Z-1a2b3c4d``."""
    return f"{clock.now():%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(4)}"


def cr_dir(root: Path, gvk: GroupVersionKind, namespace: str, name: str) -> Path:
    """The directory holding everything kept for one CR (its ``artifacts`` directory lives inside)."""
    parts = (gvk.group or CORE_GROUP_DIR, gvk.version, gvk.kind, namespace or CLUSTER_SCOPE_DIR, name)
    for part in parts:
        _check_component(part)
    return root.joinpath(*parts)


def artifacts_dir(root: Path, gvk: GroupVersionKind, namespace: str, name: str) -> Path:
    """The directory in which each run of one CR gets its ``<ident>`` subdirectory."""
    return cr_dir(root, gvk, namespace, name) / ARTIFACTS_DIR


def rotate(directory: Path, keep: int, current: str) -> list[Path]:
    """Delete the oldest run directories so that at most ``keep`` remain; return the deleted ones.

    ``keep`` 0 (or less) keeps everything. Only directories named like :func:`new_ident` idents are
    considered, and ``current`` is never deleted, even when it is not among the newest.
    """
    if keep <= 0 or not directory.is_dir():
        return []
    runs = sorted(entry for entry in directory.iterdir() if entry.is_dir() and _IDENT.fullmatch(entry.name))
    doomed = [entry for entry in runs[: max(len(runs) - keep, 0)] if entry.name != current]
    for entry in doomed:
        shutil.rmtree(entry, ignore_errors=True)
    return doomed


def remove_artifacts(root: Path, cr: Mapping[str, Any]) -> bool:
    """Delete every artifact kept for ``cr`` (read for its apiVersion, kind, namespace and name).

    Empty parent directories up to ``root`` are removed too. Returns whether anything existed.
    """
    directory = cr_dir(root, _gvk_of(cr), *_namespace_and_name(cr))
    existed = directory.exists()
    shutil.rmtree(directory, ignore_errors=True)
    _remove_empty_parents(directory.parent, root)
    return existed


def _gvk_of(cr: Mapping[str, Any]) -> GroupVersionKind:
    api_version = str(cr.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    return GroupVersionKind(group, version, str(cr.get("kind") or ""))


def _namespace_and_name(cr: Mapping[str, Any]) -> tuple[str, str]:
    metadata = cr.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def _check_component(part: str) -> None:
    if not part or part in (".", "..") or "/" in part or "\0" in part:
        raise ValueError(f"cannot use {part!r} as an artifact path component (group, version, kind, "
                         "namespace and name must be non-empty names without '/')")


def _remove_empty_parents(directory: Path, root: Path) -> None:
    while directory != root and root in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
