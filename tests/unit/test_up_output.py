"""`hybrid-operator up`'s pure parts: the lines it prints, the summary's footer, and what it applies.

A newcomer copies these lines into another shell; the footer must keep every one of them on every
redraw, and the objects `up` creates must look as if `kubectl apply` had created them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybrid_operator.cli import commands, up
from hybrid_operator.kube import objects
from hybrid_operator.manager.runtime import Endpoints

pytestmark = pytest.mark.unit


def options(tmp_path: Path) -> up.UpOptions:
    return up.UpOptions(port=6443, data_dir=tmp_path / "cluster", kubeconfig=tmp_path / "kubeconfig",
                        crd_dir=tmp_path / "crd", samples_dir=tmp_path / "samples")


def test_the_footer_keeps_every_line_on_every_redraw(tmp_path: Path) -> None:
    footer = [*up.exports(options(tmp_path)), *up.served(Endpoints("127.0.0.1:41001", "127.0.0.1:41002"))]
    rows = [("Website", "default/hello", "Successful=True", "2026-01-01T00:00:00Z")]
    first, second = up.render(rows, footer), up.render([*rows, ("Foo", "default/x", "Pending", "")], footer)
    for screen in (first, second):
        assert f"export KUBECONFIG={tmp_path / 'kubeconfig'}" in screen
        assert "metrics: http://127.0.0.1:41001/metrics" in screen
        assert "http://127.0.0.1:41002/healthz" in screen
    # kubectl and helm live next to the interpreter when `make setup` installed them
    tools = Path(up.sys.executable).parent
    has_tools = (tools / "kubectl").exists() or (tools / "helm").exists()
    assert (f"export PATH={tools}:$PATH" in second) == has_tools


def test_endpoints_that_are_off_are_not_printed() -> None:
    assert up.served(Endpoints()) == []
    assert up.served(Endpoints(metrics="[::1]:9000")) == ["metrics: http://[::1]:9000/metrics"]


def test_up_takes_free_loopback_ports_and_run_keeps_the_sdk_ones() -> None:
    parser = commands.build_parser()
    upped = parser.parse_args(["up", "--port", "6444"])
    assert (upped.port, upped.metrics_bind_address, upped.health_probe_bind_address) == \
        (6444, "127.0.0.1:0", "127.0.0.1:0")
    ran = parser.parse_args(["run"])
    assert (ran.metrics_bind_address, ran.health_probe_bind_address) == (":8080", ":8081")


def test_last_applied_is_what_kubectl_apply_writes() -> None:
    manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "default", "labels": {"x": "y"}},
                "data": {"page": "<b>café & co</b>"}}
    value = objects.last_applied(manifest)
    # as kubectl 1.32 writes it: sorted keys, compact, empty annotations kept, HTML escaped, final newline
    assert value == ('{"apiVersion":"v1","data":{"page":"\\u003cb\\u003ecafé \\u0026 co\\u003c/b\\u003e"},'
                     '"kind":"ConfigMap","metadata":{"annotations":{},"labels":{"x":"y"},"name":"a",'
                     '"namespace":"default"}}\n')
    assert json.loads(value) == {**manifest, "metadata": {**manifest["metadata"], "annotations": {}}}
    again = {**manifest, "metadata": {**manifest["metadata"],
                                      "annotations": {objects.LAST_APPLIED: value, "keep": "me"}}}
    assert json.loads(objects.last_applied(again))["metadata"]["annotations"] == {"keep": "me"}


@pytest.mark.parametrize(("entries", "summary"), [(1, "1 valid entry"), (2, "2 valid entries")])
def test_check_counts_entries_in_english(tmp_path: Path, capsys: pytest.CaptureFixture[str], entries: int,
                                         summary: str) -> None:
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    watches = tmp_path / "watches.yaml"
    watches.write_text("".join(f"- {{group: example.com, version: v1, kind: K{i}, playbook: site.yml}}\n"
                               for i in range(entries)))
    assert commands.main(["check", "--watches-file", str(watches)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{watches}: {summary}"
