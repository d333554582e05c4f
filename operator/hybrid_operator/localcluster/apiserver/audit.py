"""An audit log of the embedded API server: who asked for which verb on which resource.

kube-apiserver can write every request to an audit log; ours writes one JSON
line per resource request (verb as RBAC names it, API group, resource and
subresource, namespace, name, user agent) when started with ``--audit-log``.
Tests use it to check that the ClusterRole in ``config/rbac`` grants every
verb the operator and its automation actually used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from hybrid_operator.localcluster import clock


def rbac_verb(method: str, has_name: bool, watch: bool) -> str:
    """The RBAC verb of a request, as kube-apiserver's authorizer computes it."""
    if method == "GET":
        if watch:
            return "watch"
        return "get" if has_name else "list"
    if method == "DELETE":
        return "delete" if has_name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


class AuditLog:
    """Append-only JSON lines, flushed per request (so a killed server keeps what it logged)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle: IO[str] = path.open("a", encoding="utf-8")

    def record(self, entry: dict[str, Any]) -> None:
        self._handle.write(json.dumps({"ts": round(clock.now().timestamp(), 3), **entry}, separators=(",", ":")) + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()
