"""Issue 15 item 10: ``kubectl create deployment`` (protobuf) gets a 415 naming the alternative, which works.

No kept library ships the built-in kinds' protobuf descriptors (the only
source found is binaries of older kubectl builds, with no clear provenance for
extracted data), so the server refuses these bodies and says what to do.
"""

from __future__ import annotations

import pytest

from support.cluster import Cluster

pytestmark = pytest.mark.integration


def test_create_deployment_names_the_working_alternative(shared_cluster: Cluster) -> None:
    refused = shared_cluster.kubectl("create", "deployment", "web", "--image=nginx", check=False)
    assert refused.returncode != 0
    assert "--dry-run=client -o yaml | kubectl apply -f -" in refused.stderr, refused.stderr
    rendered = shared_cluster.kubectl("create", "deployment", "web", "--image=nginx", "--dry-run=client",
                                      "-o", "yaml").stdout
    assert "deployment.apps/web created" in shared_cluster.kubectl("apply", "-f", "-", input_text=rendered).stdout
