"""Which apply/replace writes carry the owner link (issue 14, gap 3): creations, and objects already linked."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_operator.ansible import ownership

pytestmark = pytest.mark.unit

OWNER = ownership.Owner("cache.example.com/v1alpha1", "Memcached", "m", "uid-1", "ns")


def configmap(**metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns", **metadata}}


@pytest.mark.parametrize(("existing", "link", "expected"), [
    pytest.param(ownership.ABSENT, "ownerReference", True, id="the write creates it"),
    pytest.param(ownership.UNKNOWN, "ownerReference", False, id="the API could not say: never adopt on a guess"),
    pytest.param(configmap(), "ownerReference", False, id="someone else's object"),
    pytest.param(configmap(ownerReferences=[{"uid": "uid-2", "kind": "Other", "name": "o", "apiVersion": "v1"}]),
                 "ownerReference", False, id="owned by another"),
    pytest.param(configmap(ownerReferences=[ownership.owner_reference(OWNER)]), "ownerReference", True,
                 id="already ours: restated so a replace or an apply keeps it"),
    pytest.param(configmap(annotations=ownership.owner_annotations(OWNER)), "annotations", True,
                 id="already ours by annotations"),
    pytest.param(configmap(annotations={"operator-sdk/primary-resource": "ns/other"}), "annotations", False,
                 id="annotated for another owner"),
])
def test_links_existing(existing: ownership.Existing, link: ownership.Link, expected: bool) -> None:
    assert ownership.links_existing(existing, OWNER, link) is expected
