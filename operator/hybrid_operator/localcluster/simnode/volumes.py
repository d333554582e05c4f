"""The simulated node's storage: its default StorageClass and the PersistentVolumes it provisions.

The class ``standard`` (the default class, provisioner :data:`PROVISIONER`, reclaim policy Delete,
binding Immediate) and, for a claim of a class with that provisioner, a volume ``pvc-<claim uid>``
(capacity as requested, the claim's access modes and volume mode, a ``hostPath`` that is never
created, ``claimRef`` to the claim) as a dynamic provisioner makes it.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import objects

PROVISIONER = "hybrid-operator.io/simulated"
DEFAULT_CLASS = "standard"
DEFAULT_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
PV_PROTECTION = "kubernetes.io/pv-protection"
#: the annotation naming the provisioner that made a volume
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
#: the annotations by which the PV controller asks an external provisioner for a volume (kube's AnnStorageProvisioner
#: and its beta twin)
STORAGE_PROVISIONER = ("volume.kubernetes.io/storage-provisioner", "volume.beta.kubernetes.io/storage-provisioner")
#: set on a claim by the scheduler when a WaitForFirstConsumer claim's Pod got a node
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def default_class_body() -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": DEFAULT_CLASS, "annotations": {DEFAULT_ANNOTATION: "true"}},
            "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
            "allowVolumeExpansion": True}


def is_default(storage_class: dict[str, Any]) -> bool:
    return (objects.meta(storage_class).get("annotations") or {}).get(DEFAULT_ANNOTATION) == "true"


def _quantity(claim: dict[str, Any]) -> str:
    value = objects.dig(claim, "spec", "resources", "requests", "storage")
    return str(value) if value else "1Gi"


def volume_for(claim: dict[str, Any], storage_class: dict[str, Any]) -> dict[str, Any]:
    """The PersistentVolume a provisioner makes for ``claim``."""
    name = f"pvc-{objects.uid(claim)}"
    spec = claim.get("spec") or {}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER},
                         "finalizers": [PV_PROTECTION]},
            "spec": {"capacity": {"storage": _quantity(claim)},
                     "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                     "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                     "storageClassName": objects.name(storage_class),
                     "volumeMode": spec.get("volumeMode") or "Filesystem",
                     "hostPath": {"path": f"/var/lib/hybrid-operator/volumes/{name}", "type": "DirectoryOrCreate"},
                     "claimRef": claim_ref(claim)}}


def claim_ref(claim: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PersistentVolumeClaim", "namespace": objects.namespace(claim), "name": objects.name(claim),
            "uid": objects.uid(claim), "apiVersion": "v1",
            "resourceVersion": objects.meta(claim).get("resourceVersion", "")}
