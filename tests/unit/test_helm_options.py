"""Unit tests for the pure parts of hybrid_operator.helm_reconciler: annotations, manifests, labels."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator import errors
from hybrid_operator.config import values
from hybrid_operator.config.model import GroupVersionKind, HelmWatch
from hybrid_operator.config.settings import Settings
from hybrid_operator.helm import reconciler as helm_reconciler

pytestmark = pytest.mark.unit

P = helm_reconciler.PREFIX
WATCH = HelmWatch(gvk=GroupVersionKind("cache.example.com", "v1alpha1", "Memcached"), chart=Path("charts/x"))
SETTINGS = Settings(reconcile_period=timedelta(minutes=1))


def cr(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "m", "namespace": "ns", "annotations": annotations}}


@pytest.mark.parametrize(("text", "default", "expected"), [
    ("true", False, True), ("1", False, True), ("T", False, True), ("False", True, False), ("0", True, False),
    ("yes", False, False), ("yes", True, True), ("", True, True), (" true ", False, True), ("TrUe", False, False),
])
def test_parse_bool_is_go_parsebool_with_default(text: str, default: bool, expected: bool) -> None:
    assert values.parse_bool(text, default) is expected


def test_defaults_without_annotations() -> None:
    options = helm_reconciler.helm_options(cr({}), WATCH, SETTINGS)
    assert options.period == timedelta(minutes=1)
    assert options.rollback.force is True          # rollback-force defaults to true (SDK)
    assert options.upgrade.force is False
    assert options.uninstall_wait is False
    assert (options.install.no_hooks, options.upgrade.no_hooks, options.uninstall.no_hooks) == (False,) * 3


def test_annotations_are_read() -> None:
    options = helm_reconciler.helm_options(cr({
        P + "reconcile-period": "2s", P + "upgrade-force": "true", P + "rollback-force": "false",
        P + "uninstall-wait": "1", P + "install-disable-hooks": "true", P + "upgrade-disable-hooks": "t",
        P + "uninstall-disable-hooks": "True", P + "install-description": "first",
        P + "upgrade-description": "next", P + "uninstall-description": "bye",
    }), WATCH, SETTINGS)
    assert options.period == timedelta(seconds=2)
    assert (options.upgrade.force, options.rollback.force, options.uninstall_wait) == (True, False, True)
    assert (options.install.no_hooks, options.upgrade.no_hooks, options.uninstall.no_hooks) == (True,) * 3
    assert (options.install.description, options.upgrade.description, options.uninstall.description) == \
        ("first", "next", "bye")


def test_watch_period_is_used_before_the_flag() -> None:
    watch = HelmWatch(gvk=WATCH.gvk, chart=WATCH.chart, reconcile_period=timedelta(seconds=30))
    assert helm_reconciler.helm_options(cr({}), watch, SETTINGS).period == timedelta(seconds=30)


def test_bad_reconcile_period_is_permanent() -> None:
    with pytest.raises(errors.PermanentError, match="reconcile-period"):
        helm_reconciler.helm_options(cr({P + "reconcile-period": "soon"}), WATCH, SETTINGS)


def test_manifest_objects_expands_lists_and_skips_empty_documents() -> None:
    manifest = """---
# Source: x/templates/empty.yaml
---
apiVersion: v1
kind: Service
metadata: {name: s}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
"""
    names = [(o["kind"], o["metadata"]["name"]) for o in helm_reconciler.manifest_objects(manifest)]
    assert names == [("Service", "s"), ("ConfigMap", "a"), ("ConfigMap", "b")]


def test_with_helm_ownership_adds_what_helm_adds_and_keeps_the_rest() -> None:
    obj = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "s", "labels": {"app": "x"}, "annotations": {"note": "y"}}}
    owned = helm_reconciler.with_helm_ownership(obj, "rel", "ns")
    assert owned["metadata"]["labels"] == {"app": "x", "app.kubernetes.io/managed-by": "Helm"}
    assert owned["metadata"]["annotations"] == {"note": "y", "meta.helm.sh/release-name": "rel",
                                                "meta.helm.sh/release-namespace": "ns"}
    assert obj["metadata"]["labels"] == {"app": "x"}  # the input is not modified


def test_inputs_label_is_a_valid_label_value() -> None:
    value = helm_reconciler.inputs_label("a" * 40, 12345)
    assert value == "a" * 40 + "-r12345" and len(value) <= 63


@pytest.mark.parametrize(("argv", "expected"), [
    ([], (False, 10, False, timedelta(minutes=5))),
    (["--suppress-override-values", "--helm-manifest-digest"], (True, 10, True, timedelta(minutes=5))),
    (["--suppress-override-values=false", "--history-max", "3", "--helm-timeout", "90s"],
     (False, 3, False, timedelta(seconds=90))),
])
def test_run_flags_for_helm(argv: list[str], expected: tuple[object, ...]) -> None:
    from hybrid_operator.cli import commands as cli

    args = cli.build_parser().parse_args(["run", *argv])
    assert (args.suppress_override_values, args.history_max, args.helm_manifest_digest, args.helm_timeout) == expected
