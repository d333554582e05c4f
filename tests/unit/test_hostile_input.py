"""Unit tables for the parsers that face hostile input: proxy request targets, watches paths, YAML aliases."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml

from hybrid_operator.ansible import commandfile
from hybrid_operator.ansible.proxy import api_target
from hybrid_operator.config.entries import leaves_directory
from hybrid_operator.config.watches import expanded_size

pytestmark = pytest.mark.unit

TARGETS = [
    ("/api", ("/api", "")),
    ("/api/", ("/api/", "")),
    ("/apis/apps/v1/namespaces/a/deployments?watch=1&resourceVersion=5", (
        "/apis/apps/v1/namespaces/a/deployments", "watch=1&resourceVersion=5")),
    ("/version?timeout=32s", ("/version", "timeout=32s")),
    ("/openapi/v3/apis/apps/v1?hash=AB", ("/openapi/v3/apis/apps/v1", "hash=AB")),
    ("/api/v1/namespaces/a/configmaps?labelSelector=app%3Dweb", (
        "/api/v1/namespaces/a/configmaps", "labelSelector=app%3Dweb")),
    ("http://x/api", None),
    ("https://x:443/api", None),
    ("//x/api", None),
    ("*", None),
    ("x.example:443", None),
    ("/", None),
    ("/metrics", None),
    ("/debug/pprof", None),
    ("/api/../metrics", None),
    ("/api/%2E%2e/metrics", None),
    ("/api/./v1", None),
    ("/api//v1", None),
    ("/api/v1#frag", None),
    ("/api/v1 x", None),
    ("/api/v1\\..\\x", None),
    ("/api/%zz", None),
]


@pytest.mark.parametrize(("raw", "expected"), TARGETS, ids=[case[0] for case in TARGETS])
def test_api_target(raw: str, expected: tuple[str, str] | None) -> None:
    assert api_target(raw) == expected


PATHS = [
    ("playbooks/site.yml", False), ("./playbooks/../site.yml", False), ("/opt/ansible/playbooks/x.yml", False),
    ("~/playbooks/x.yml", False), ("memcached", False), ("ns.coll.role", False), ("roles/../roles/x", False),
    ("..", True), ("../x", True), ("../../../../etc/passwd", True), ("playbooks/../../x", True), ("a/../../b", True),
]


@pytest.mark.parametrize(("value", "escapes"), PATHS)
def test_leaves_directory(value: str, escapes: bool) -> None:
    assert leaves_directory(value) is escapes


def node(text: str) -> yaml.Node:
    composed = yaml.compose(text, Loader=yaml.SafeLoader)
    assert composed is not None
    return composed


def test_expanded_size_counts_aliases_without_expanding() -> None:
    assert expanded_size(node("[a, b]"), 100) == 3
    assert expanded_size(node("{x: &a [1, 2], y: *a, z: *a}"), 100) == 1 + 3 * (1 + 3)
    levels = ['l0: &l0 [x, x, x, x, x, x, x, x, x, x]']
    levels += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 30)]
    assert expanded_size(node("{" + ", ".join(levels) + "}"), 10_000) == 10_001  # 10**30 values, counted at once
    assert expanded_size(node("&a [*a]"), 100) is None


def test_command_file_guard_redacts_what_is_written_through_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with commandfile.CommandFileGuard(run_dir) as guard:
        writer = threading.Thread(target=lambda: (run_dir / "command").write_text(
            '{"command": ["ansible-playbook"], "cwd": "/", "env": {"PATH": "/bin", "TOKEN": "secret"}}'))
        writer.start()
        writer.join(timeout=10)
    assert guard.received
    assert "secret" not in (run_dir / "command").read_text()
    assert (run_dir / "command").stat().st_mode & 0o777 == 0o600


def test_command_file_guard_leaves_no_pipe_when_nothing_was_written(tmp_path: Path) -> None:
    with commandfile.CommandFileGuard(tmp_path / "run") as guard:
        pass
    assert not guard.received and list((tmp_path / "run").iterdir()) == []
