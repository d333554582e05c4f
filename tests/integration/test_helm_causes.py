"""Helm's real error reaches the CR, and a render that only spells a value differently is no change
(issue 14, gaps 9 and 10).

* An uninstall failing because a chart's CRD is gone says only ``failed to delete release: x`` on
  helm's Error line; the cause (``no matches for kind ServiceMonitor ... ensure CRDs are installed
  first``) is in helm v4's debug log lines, which the client now asks for and reads.
* A chart with ``lookup`` + ``randAlphaNum`` under ``dryRunOption: server`` renders the value quoted
  on install and unquoted later: parsed, the manifests are the same objects.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hybrid_operator.helm import client as helm
from hybrid_operator.helm import release
from hybrid_operator.helm.client import HelmClient, HelmError, Release, ReleaseInfo
from support.cluster import Cluster, find_binary

pytestmark = pytest.mark.integration

UNINSTALL_STDERR = (
    'level=DEBUG msg="uninstall: deleting release" name=ksm-sm\n'
    'level=DEBUG msg="uninstall: Failed to delete release" error="[unable to build kubernetes objects for delete: '
    'resource mapping not found for name: \\"ksm-sm\\" namespace: \\"\\" from \\"\\": no matches for kind '
    '\\"ServiceMonitor\\" in version \\"monitoring.coreos.com/v1\\"\\nensure CRDs are installed first]"\n'
    "Error: failed to delete release: ksm-sm\n")


def test_the_cause_in_helms_debug_lines_is_added_to_its_message() -> None:
    message = helm.error_message(UNINSTALL_STDERR)
    assert message.startswith("failed to delete release: ksm-sm: unable to build kubernetes objects for delete")
    assert 'no matches for kind "ServiceMonitor" in version "monitoring.coreos.com/v1"\nensure CRDs are installed ' \
           "first" in message
    assert "uninstall: deleting release" not in message  # not every log line: the failures' causes


def test_debug_lines_without_a_failure_add_nothing() -> None:
    stderr = ('level=DEBUG msg="creating resource(s)" resources=1\n'
              'level=DEBUG msg="wait: retrying" error="connection refused"\n'
              "Error: INSTALLATION FAILED: boom\n")
    assert helm.error_message(stderr) == "INSTALLATION FAILED: boom"
    assert helm.classify(helm.error_message(stderr)) is helm.HelmErrorKind.OTHER


def test_a_cause_already_in_the_message_is_not_repeated() -> None:
    stderr = 'level=WARN msg="upgrade failed" error="boom"\nError: UPGRADE FAILED: boom\n'
    assert helm.error_message(stderr) == "UPGRADE FAILED: boom"


CHART_CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


async def test_an_uninstall_failing_on_a_missing_crd_says_why(shared_cluster: Cluster, tmp_path: Path) -> None:
    cluster = shared_cluster
    chart = tmp_path / "ksm"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: ksm\nversion: 0.1.0\n")
    (chart / "templates" / "sm.yaml").write_text(
        "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: {{ .Release.Name }}\n"
        "spec:\n  endpoints: [{port: http}]\n")
    crd = tmp_path / "crd.yaml"
    crd.write_text(CHART_CRD)
    cluster.kubectl("apply", "-f", str(crd))
    cluster.kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com")
    def helm_client(home: str) -> HelmClient:  # each with its own discovery cache (helm keeps one in HOME)
        return HelmClient(find_binary("helm"), cluster.kubeconfig, env={**cluster.env(), "HOME": str(tmp_path / home)},
                          timeout=60)

    await helm_client("installer").install("ksm-sm", "default", chart, {})
    cluster.kubectl("delete", "-f", str(crd))
    with pytest.raises(HelmError) as raised:
        await helm_client("uninstaller").uninstall("ksm-sm", "default")
    assert "failed to delete release: ksm-sm" in raised.value.message
    assert 'no matches for kind "ServiceMonitor"' in raised.value.message
    assert "ensure CRDs are installed first" in raised.value.message


QUOTED = """---
# Source: app/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata:
  name: app
stringData:
  password: "x7Yq2"
  port: "8080"
"""
UNQUOTED = QUOTED.replace('password: "x7Yq2"', "password: x7Yq2")


def comparison(candidate: str, deployed: str, labels: dict[str, str]) -> release.Comparison:
    info = ReleaseInfo(name="app", revision=1, status="deployed", labels=labels)
    return release.Comparison(info, deployed, Release("app", 2, "pending-upgrade", candidate))


def test_the_same_objects_spelled_differently_are_unchanged_not_nondeterministic() -> None:
    label = {release.INPUTS_LABEL: release.inputs_label("digest", 1)}
    latest = ReleaseInfo(name="app", revision=1, status="deployed", labels=label)
    state = release.release_state(latest, [], comparison(UNQUOTED, QUOTED, label), "digest")
    assert state.phase is release.Phase.UNCHANGED
    assert not state.nondeterministic


def test_a_real_difference_still_counts() -> None:
    label = {release.INPUTS_LABEL: release.inputs_label("digest", 1)}
    latest = ReleaseInfo(name="app", revision=1, status="deployed", labels=label)
    other = QUOTED.replace("x7Yq2", "Zk81p")
    assert release.release_state(latest, [], comparison(other, QUOTED, label), "digest").nondeterministic
    assert release.release_state(latest, [], comparison(other, QUOTED, label), "changed").phase \
        is release.Phase.NEEDS_UPGRADE
    # a number is not the string of its digits
    typed = QUOTED.replace('port: "8080"', "port: 8080")
    assert not release.same_objects(typed, QUOTED)
    assert release.same_objects("a: [unclosed", "a: [unclosed")  # unparsable: compared as text
