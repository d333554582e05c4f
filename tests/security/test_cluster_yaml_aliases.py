"""Issue 12 item 6: a YAML alias bomb is refused before it is expanded.

A few kilobytes of nested anchors (each level aliasing the previous one ten
times) expand to millions of nodes.  Sent over raw HTTPS as
``application/yaml`` (create) and ``application/apply-patch+yaml`` (server-side
apply), it must get a 400 Status at once, store nothing, leave ``state.db``
as it was, and leave the server answering within 100 ms.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from security.cluster_attacks import Probe, status_of
from support.cluster import Cluster, raw_request

pytestmark = [pytest.mark.security, pytest.mark.integration]

CMS = "/api/v1/namespaces/default/configmaps"


def alias_bomb(levels: int = 7, width: int = 10) -> str:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: bomb", "x0: &x0 [\"lol\", \"lol\"]"]
    for level in range(1, levels + 1):
        refs = ", ".join(f"*x{level - 1}" for _ in range(width))
        lines.append(f"x{level}: &x{level} [{refs}]")
    lines.append(f"data: {{k: \"v\"}}\nbomb: *x{levels}")
    return "\n".join(lines) + "\n"


def many_aliases(count: int = 500) -> str:
    refs = "\n".join(f"  k{i}: *v" for i in range(count))
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: many\nvalue: &v x\ndata:\n{refs}\n"


@pytest.mark.parametrize(("method", "path", "content_type", "body"), [
    ("POST", CMS, "application/yaml", alias_bomb()),
    ("PATCH", f"{CMS}/bomb?fieldManager=attacker", "application/apply-patch+yaml", alias_bomb()),
    ("POST", CMS, "application/yaml", many_aliases()),
], ids=["create-bomb", "apply-bomb", "many-aliases"])
def test_yaml_alias_bombs_are_refused_without_expanding(cluster: Cluster, method: str, path: str,
                                                       content_type: str, body: str) -> None:
    database = cluster.data_dir / "state.db"
    size_before = database.stat().st_size + _size(Path(str(database) + "-wal"))
    probe = Probe(cluster)
    began = time.monotonic()
    response = raw_request(cluster, method, path, body, content_type=content_type, timeout=60)
    elapsed = time.monotonic() - began
    status = status_of(response, f"{method} {content_type} alias bomb")
    assert response.status == 400, status
    assert status["reason"] == "BadRequest"
    assert "alias" in status["message"], status["message"]
    assert elapsed < 2, f"refusing took {elapsed:.1f}s"
    assert raw_request(cluster, "GET", f"{CMS}/bomb").status == 404
    assert raw_request(cluster, "GET", f"{CMS}/many").status == 404
    size_after = database.stat().st_size + _size(Path(str(database) + "-wal"))
    assert size_after - size_before < 1024 * 1024, f"state.db grew by {size_after - size_before} bytes"
    probe.assert_alive(f"{method} alias bomb")
    probe.close()


def test_ordinary_anchors_still_work(cluster: Cluster) -> None:
    body = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: anchors\n  labels: &l {app: web}\n"
            "  annotations: *l\ndata: {when: 2024-01-01, flag: 'yes'}\n")
    response = raw_request(cluster, "POST", CMS, body, content_type="application/yaml")
    assert response.status == 201, response.body
    created = response.json()
    assert created["metadata"]["annotations"] == {"app": "web"}
    assert created["data"] == {"when": "2024-01-01", "flag": "yes"}


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0
