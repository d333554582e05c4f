"""The node agent as a dynamic provisioner, and the volume checks its scheduler makes.

kube-controller-manager's PV controller binds claims to volumes; for a claim of a class whose
provisioner is not built in it only asks, by annotating the claim with
``volume.kubernetes.io/storage-provisioner`` (and its beta twin), and waits for a volume to appear.
The agent answers for :data:`~..simnode.volumes.PROVISIONER`, as an external provisioner does: it
makes sure a default StorageClass exists (``standard``, as in the embedded cluster, unless the cluster
has a default class or a class of that name already), creates the volume ``pvc-<claim uid>`` that
:func:`~..simnode.volumes.volume_for` describes, pre-bound to the claim (the PV controller then binds
both), and deletes a volume it made once the PV controller reports it Released under reclaim policy
Delete.

A ``WaitForFirstConsumer`` claim is provisioned only once a Pod using it has a node: as kube-scheduler
does, the agent's scheduler sets ``volume.kubernetes.io/selected-node`` on the claim and binds the Pod
once the claim is Bound. A Pod whose claim is missing, or whose ``Immediate`` claim is not bound yet,
stays Pending and Unschedulable until the claim changes.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.nodeagent.context import CONFLICT, GONE, AgentContext, tolerating
from hybrid_operator.localcluster.simnode.node import NODE_NAME
from hybrid_operator.localcluster.simnode.podstatus import claim_names
from hybrid_operator.localcluster.simnode.volumes import (
    DEFAULT_CLASS,
    PROVISIONED_BY,
    PROVISIONER,
    SELECTED_NODE,
    STORAGE_PROVISIONER,
    default_class_body,
    is_default,
    volume_for,
)

log = logging.getLogger(__name__)

CLASSES_PATH = "/apis/storage.k8s.io/v1/storageclasses"
VOLUMES_PATH = "/api/v1/persistentvolumes"
PREEMPTION = "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
UNBOUND_IMMEDIATE = f"0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. {PREEMPTION}"
Verdict = tuple[Literal["ready", "wait", "unschedulable"], str]


def _claim_path(claim: dict[str, Any]) -> str:
    return f"/api/v1/namespaces/{objects.namespace(claim)}/persistentvolumeclaims/{objects.name(claim)}"


def _bound(claim: dict[str, Any]) -> bool:
    return bool(objects.dig(claim, "spec", "volumeName")) and objects.dig(claim, "status", "phase") == "Bound"


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    found = objects.meta(obj).get("annotations")
    return found if isinstance(found, dict) else {}


def _ephemeral_claims(pod: dict[str, Any]) -> set[str]:
    volumes = objects.dig(pod, "spec", "volumes")
    return {f"{objects.name(pod)}-{volume.get('name', '')}" for volume in volumes if isinstance(volume, dict)
            and isinstance(volume.get("ephemeral"), dict)} if isinstance(volumes, list) else set()


class Provisioner:
    """Provisions and deletes the volumes of :data:`PROVISIONER`'s classes; answers the scheduler's volume checks."""

    def __init__(self, context: AgentContext) -> None:
        self.context = context

    async def ensure_class(self) -> None:
        """Create the default class ``standard`` unless a default class or one of that name exists."""
        answer = await self.context.client.get(CLASSES_PATH)
        classes = [c for c in answer.get("items") or [] if isinstance(c, dict)]
        if any(objects.name(c) == DEFAULT_CLASS or is_default(c) for c in classes):
            return
        if await tolerating((CONFLICT,), self.context.client.create(CLASSES_PATH, default_class_body())):
            log.info("storage class created", extra={"storage_class": DEFAULT_CLASS, "provisioner": PROVISIONER})

    def _class_of(self, claim: dict[str, Any]) -> dict[str, Any] | None:
        name = objects.dig(claim, "spec", "storageClassName")
        return self.context.classes.get("", str(name)) if name else None

    async def sync_claim(self, namespace: str, name: str) -> None:
        """Provision a volume for the claim when the PV controller asks this provisioner for one."""
        claim = self.context.claims.get(namespace, name)
        if claim is None or objects.deleting(claim) or objects.dig(claim, "spec", "volumeName"):
            return
        annotations = _annotations(claim)
        if not any(annotations.get(key) == PROVISIONER for key in STORAGE_PROVISIONER):
            return
        storage_class = self._class_of(claim)
        if storage_class is None or storage_class.get("provisioner") != PROVISIONER:
            return
        if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and \
                annotations.get(SELECTED_NODE) != NODE_NAME:
            return
        volume = volume_for(claim, storage_class)
        if self.context.volumes.get("", objects.name(volume)) is not None:
            return
        if await tolerating((CONFLICT,), self.context.client.create(VOLUMES_PATH, volume)):
            log.info("volume provisioned", extra={"volume": objects.name(volume), "namespace": namespace,
                                                  "claim": name})

    async def sync_volume(self, name: str) -> None:
        """Delete a volume this provisioner made once it is Released under reclaim policy Delete."""
        volume = self.context.volumes.get("", name)
        if volume is None or objects.deleting(volume) or _annotations(volume).get(PROVISIONED_BY) != PROVISIONER:
            return
        if objects.dig(volume, "status", "phase") != "Released" or \
                objects.dig(volume, "spec", "persistentVolumeReclaimPolicy") != "Delete":
            return
        if await tolerating((GONE, CONFLICT), self.context.client.delete(
                f"{VOLUMES_PATH}/{name}", {"preconditions": {"uid": objects.uid(volume)}})):
            log.info("volume deleted", extra={"volume": name})

    async def verdict(self, pod: dict[str, Any]) -> Verdict:
        """Whether the Pod's claims let it be bound now, must be waited for, or make it unschedulable (and why)."""
        waiting = False
        namespace = objects.namespace(pod)
        for name in sorted(claim_names(pod)):
            claim = self.context.claims.get(namespace, name)
            if claim is None:
                missing = f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"' \
                    if name in _ephemeral_claims(pod) else f'persistentvolumeclaim "{name}" not found'
                return "unschedulable", f"0/1 nodes are available: {missing}. {PREEMPTION}"
            if objects.deleting(claim):
                return "unschedulable", f'0/1 nodes are available: persistentvolumeclaim "{name}" is being ' \
                                        f"deleted. {PREEMPTION}"
            if _bound(claim):
                continue
            storage_class = self._class_of(claim)
            if storage_class is None or storage_class.get("volumeBindingMode") != "WaitForFirstConsumer":
                return "unschedulable", UNBOUND_IMMEDIATE
            waiting = True
            if _annotations(claim).get(SELECTED_NODE) != NODE_NAME:
                await self.context.client.merge_patch(_claim_path(claim), {
                    "metadata": {"uid": objects.uid(claim), "annotations": {SELECTED_NODE: NODE_NAME}}})
        return ("wait", "") if waiting else ("ready", "")

    def pods_using(self, claim: dict[str, Any]) -> list[dict[str, Any]]:
        """The unbound Pods of the claim's namespace that name it (to schedule again when it changes)."""
        namespace, name = objects.namespace(claim), objects.name(claim)
        return [pod for pod in self.context.pods.values()
                if objects.namespace(pod) == namespace and not objects.dig(pod, "spec", "nodeName")
                and name in claim_names(pod)]
