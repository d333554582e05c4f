"""Storage: a default StorageClass, PersistentVolumes made for claims, and the protection finalizers.

What kube's PV controller, a dynamic provisioner and the pvc/pv-protection
controllers do together:

* the StorageClass ``standard`` (the default class, provisioner
  :data:`~..simnode.volumes.PROVISIONER`, reclaim policy Delete, binding
  Immediate) exists from the start;
* a claim without ``storageClassName`` gets the default class; a claim of a
  class this provisioner serves gets a PersistentVolume ``pvc-<claim uid>``
  (capacity as requested, the claim's access modes, ``claimRef``) and both
  become Bound (with ``WaitForFirstConsumer``, once a Pod uses the claim);
  a claim naming a volume, or of another class, binds to a matching
  Available volume when there is one (the class and the volume are
  :mod:`..simnode.volumes`', shared with the node agent);
* claims carry ``kubernetes.io/pvc-protection`` and volumes
  ``kubernetes.io/pv-protection``: a deleted claim goes once no running Pod
  uses it, and its volume is then Released and, with reclaim policy Delete,
  deleted; a deleted volume goes once no claim is bound to it;
* a Pod's generic ephemeral volume gets its claim ``<pod>-<volume>``, owned
  by the Pod (kube's ephemeral volume controller).
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers import pods
from hybrid_operator.localcluster.controllers.index import Key
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import (
    PERSISTENTVOLUMECLAIMS_KEY,
    PERSISTENTVOLUMES_KEY,
    STORAGECLASSES_KEY,
)
from hybrid_operator.localcluster.simnode.podstatus import claim_names
from hybrid_operator.localcluster.simnode.volumes import (
    DEFAULT_CLASS,
    PROVISIONED_BY,
    PROVISIONER,
    PV_PROTECTION,
    claim_ref,
    default_class_body,
    is_default,
    volume_for,
)

PVC_PROTECTION = "kubernetes.io/pvc-protection"
BOUND_ANNOTATIONS = {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}


def _phase(obj: dict[str, Any]) -> str:
    return str(objects.dig(obj, "status", "phase") or "")


def _fits(volume: dict[str, Any], claim: dict[str, Any]) -> bool:
    """Whether an Available volume can serve the claim (class and access modes; sizes are not compared)."""
    vspec, cspec = volume.get("spec") or {}, claim.get("spec") or {}
    if _phase(volume) not in ("", "Available") or vspec.get("claimRef"):
        return False
    if (vspec.get("storageClassName") or "") != (cspec.get("storageClassName") or ""):
        return False
    return set(cspec.get("accessModes") or []) <= set(vspec.get("accessModes") or [])


class StorageController:
    """Binds claims to volumes, provisions volumes, and runs the protection finalizers."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def start(self) -> None:
        if self.view.peek((STORAGECLASSES_KEY, "", DEFAULT_CLASS)) is None and self._default_class() is None:
            self.view.create(STORAGECLASSES_KEY, "", default_class_body())

    def _default_class(self) -> dict[str, Any] | None:
        for key in self.view.index.of_kind(STORAGECLASSES_KEY):
            found = self.view.peek(key)
            if found is not None and is_default(found):
                return found
        return None

    # -- claims --------------------------------------------------------------------------------

    def sync_claim(self, seen: dict[str, Any]) -> None:
        key = (PERSISTENTVOLUMECLAIMS_KEY, objects.namespace(seen), objects.name(seen))
        claim = self.view.peek(key)
        if claim is None or objects.uid(claim) != objects.uid(seen):
            return
        if objects.deleting(claim):
            self._release_claim(key, claim)
            return
        if PVC_PROTECTION not in objects.finalizers(claim) or "storageClassName" not in (claim.get("spec") or {}):
            self._complete_claim(key)
            claim = self.view.peek(key)
            if claim is None:
                return
        if _phase(claim) != "Bound":
            self._bind(key, claim)

    def _complete_claim(self, key: Key) -> None:
        default = self._default_class()

        def complete(claim: dict[str, Any]) -> None:
            if PVC_PROTECTION not in objects.finalizers(claim):
                claim["metadata"]["finalizers"] = [*objects.finalizers(claim), PVC_PROTECTION]
            spec = claim.setdefault("spec", {})
            if "storageClassName" not in spec and default is not None:
                spec["storageClassName"] = objects.name(default)

        self.view.update(key, complete)

    def _bind(self, key: Key, claim: dict[str, Any]) -> None:
        spec = claim.get("spec") or {}
        wanted = spec.get("volumeName")
        if wanted:
            volume = self.view.peek((PERSISTENTVOLUMES_KEY, "", str(wanted)))
            if volume is not None and (_fits(volume, claim) or self._bound_to(volume, claim)):
                self._bind_pair(key, claim, volume)
            return
        for volume_key in self.view.index.of_kind(PERSISTENTVOLUMES_KEY, ""):
            volume = self.view.peek(volume_key)
            if volume is not None and (self._bound_to(volume, claim) or _fits(volume, claim)):
                self._bind_pair(key, claim, volume)
                return
        self._provision(key, claim)

    @staticmethod
    def _bound_to(volume: dict[str, Any], claim: dict[str, Any]) -> bool:
        ref = objects.dig(volume, "spec", "claimRef") or {}
        return isinstance(ref, dict) and ref.get("uid") == objects.uid(claim)

    def _provision(self, key: Key, claim: dict[str, Any]) -> None:
        class_name = objects.dig(claim, "spec", "storageClassName")
        storage_class = self.view.peek((STORAGECLASSES_KEY, "", str(class_name))) if class_name else None
        if storage_class is None or storage_class.get("provisioner") != PROVISIONER:
            return
        if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and not self._in_use(claim):
            return
        volume = self.view.create(PERSISTENTVOLUMES_KEY, "", volume_for(claim, storage_class))
        if volume is not None:
            self._bind_pair(key, claim, volume)

    def _bind_pair(self, key: Key, claim: dict[str, Any], volume: dict[str, Any]) -> None:
        volume_key = (PERSISTENTVOLUMES_KEY, "", objects.name(volume))
        if not self._bound_to(volume, claim):
            def reserve(fresh: dict[str, Any]) -> None:
                fresh.setdefault("spec", {})["claimRef"] = claim_ref(claim)
                if PV_PROTECTION not in objects.finalizers(fresh):
                    fresh["metadata"]["finalizers"] = [*objects.finalizers(fresh), PV_PROTECTION]

            self.view.update(volume_key, reserve)
        self.view.set_status(volume_key, {"phase": "Bound"})

        def bind(fresh: dict[str, Any]) -> None:
            fresh.setdefault("spec", {})["volumeName"] = objects.name(volume)
            annotations = fresh["metadata"].setdefault("annotations", {})
            annotations.update(BOUND_ANNOTATIONS)
            if objects.dig(volume, "metadata", "annotations", PROVISIONED_BY) == PROVISIONER:
                annotations["volume.beta.kubernetes.io/storage-provisioner"] = PROVISIONER
                annotations["volume.kubernetes.io/storage-provisioner"] = PROVISIONER

        self.view.update(key, bind)
        vspec = volume.get("spec") or {}
        self.view.set_status(key, {"phase": "Bound", "accessModes": list(vspec.get("accessModes") or []),
                                   "capacity": dict(vspec.get("capacity") or {})})

    def _in_use(self, claim: dict[str, Any]) -> bool:
        """Whether a Pod that has not finished names the claim among its volumes."""
        for pod_key in self.view.index.claim_users(objects.namespace(claim), objects.name(claim)):
            pod = self.view.peek(pod_key)
            if pod is not None and pods.phase(pod) not in pods.FINISHED:
                return True
        return False

    def _release_claim(self, key: Key, claim: dict[str, Any]) -> None:
        """pvc-protection: a deleted claim goes once no Pod uses it."""
        if PVC_PROTECTION not in objects.finalizers(claim) or self._in_use(claim):
            return

        def unprotect(fresh: dict[str, Any]) -> None:
            fresh["metadata"]["finalizers"] = [f for f in objects.finalizers(fresh) if f != PVC_PROTECTION]

        self.view.update(key, unprotect)

    def claim_gone(self, claim: dict[str, Any]) -> None:
        """The claim is gone: its volume is Released (and deleted under reclaim policy Delete)."""
        name = objects.dig(claim, "spec", "volumeName")
        if name:
            volume = self.view.peek((PERSISTENTVOLUMES_KEY, "", str(name)))
            if volume is not None:
                self.view.soon("volume", (PERSISTENTVOLUMES_KEY, "", str(name)), self.sync_volume, volume)

    # -- volumes -------------------------------------------------------------------------------

    def sync_volume(self, seen: dict[str, Any]) -> None:
        key = (PERSISTENTVOLUMES_KEY, "", objects.name(seen))
        volume = self.view.peek(key)
        if volume is None or objects.uid(volume) != objects.uid(seen):
            return
        claim = self._claim_of(volume)
        if objects.deleting(volume):
            if claim is None and PV_PROTECTION in objects.finalizers(volume):
                def unprotect(fresh: dict[str, Any]) -> None:
                    fresh["metadata"]["finalizers"] = [f for f in objects.finalizers(fresh) if f != PV_PROTECTION]

                self.view.update(key, unprotect)
            return
        ref = objects.dig(volume, "spec", "claimRef")
        if not ref:
            if not _phase(volume):
                self.view.set_status(key, {"phase": "Available"})
                self._wake_pending_claims()
            return
        if claim is None and isinstance(ref, dict) and ref.get("uid"):
            self.view.set_status(key, {"phase": "Released"})
            if objects.dig(volume, "spec", "persistentVolumeReclaimPolicy") == "Delete":
                self.view.delete(key)

    def _claim_of(self, volume: dict[str, Any]) -> dict[str, Any] | None:
        ref = objects.dig(volume, "spec", "claimRef")
        if not isinstance(ref, dict):
            return None
        claim = self.view.peek((PERSISTENTVOLUMECLAIMS_KEY, str(ref.get("namespace", "")), str(ref.get("name", ""))))
        if claim is None or (ref.get("uid") and objects.uid(claim) != ref.get("uid")):
            return None
        return claim

    def _wake_pending_claims(self) -> None:
        for key in self.view.index.of_kind(PERSISTENTVOLUMECLAIMS_KEY):
            claim = self.view.peek(key)
            if claim is not None and _phase(claim) != "Bound":
                self.view.soon("claim", key, self.sync_claim, claim)

    # -- pods ----------------------------------------------------------------------------------

    def _ephemeral_claims(self, pod: dict[str, Any]) -> None:
        for volume in objects.dig(pod, "spec", "volumes") or []:
            template = objects.dig(volume, "ephemeral", "volumeClaimTemplate") if isinstance(volume, dict) else None
            if not isinstance(template, dict) or objects.deleting(pod):
                continue
            namespace, name = objects.namespace(pod), f"{objects.name(pod)}-{volume.get('name', '')}"
            if self.view.peek((PERSISTENTVOLUMECLAIMS_KEY, namespace, name)) is not None:
                continue
            meta = dict(template.get("metadata") or {})
            meta.update(name=name, namespace=namespace, ownerReferences=[{
                "apiVersion": "v1", "kind": "Pod", "name": objects.name(pod), "uid": objects.uid(pod),
                "controller": True, "blockOwnerDeletion": True}])
            self.view.create(PERSISTENTVOLUMECLAIMS_KEY, namespace, {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
                "spec": dict(template.get("spec") or {})})

    def pod_changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A Pod came, went or finished: the claims it names may now bind or be released."""
        if new is not None and old is None:
            self._ephemeral_claims(new)
        if old is not None and new is not None and pods.phase(old) == pods.phase(new) and \
                claim_names(old) == claim_names(new):
            return
        for pod in (old, new):
            if pod is None:
                continue
            for name in claim_names(pod):
                key = (PERSISTENTVOLUMECLAIMS_KEY, objects.namespace(pod), name)
                claim = self.view.peek(key)
                if claim is not None:
                    self.view.soon("claim", key, self.sync_claim, claim)

