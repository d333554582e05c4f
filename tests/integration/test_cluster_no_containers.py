"""Issue 15 item 8: exec, attach, port-forward and logs say at once that no containers run here.

Through kubectl against a real server process: each answers within seconds
with kube's ``Error from server (BadRequest)`` carrying the reason, instead
of a 404 that reads like a missing object (or a hang); a missing pod is
still a 404.
"""

from __future__ import annotations

import json
import time

import pytest

from support.cluster import Cluster

pytestmark = pytest.mark.integration

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "idle", "labels": {"app": "idle"}},
       "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


@pytest.mark.parametrize(("args", "said"), [
    (("logs", "idle"), "logs are not available"),
    (("exec", "idle", "--", "ls"), "exec is not available"),
    (("attach", "idle"), "attach is not available"),
    (("port-forward", "pod/idle", "18080:80"), "port-forward is not available"),
])
def test_streaming_commands_say_no_containers_run(shared_cluster: Cluster, args: tuple[str, ...], said: str) -> None:
    shared_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(POD))
    began = time.monotonic()
    result = shared_cluster.kubectl(*args, check=False, timeout=30)
    assert result.returncode != 0
    assert f"this embedded cluster runs no containers: {said}" in result.stderr, result.stderr
    assert time.monotonic() - began < 10


def test_logs_of_a_missing_pod_is_not_found(shared_cluster: Cluster) -> None:
    result = shared_cluster.kubectl("logs", "nothere", check=False)
    assert 'pods "nothere" not found' in result.stderr
