"""Namespaces: what every namespace holds, and their termination, as kube-controller-manager does them.

Every namespace that is not terminating has the ServiceAccount ``default``
(the serviceaccount controller) and the ConfigMap ``kube-root-ca.crt`` with
the cluster's CA (the root-ca-cert-publisher), both recreated when deleted.
A namespace being deleted has its contents deleted (nothing new may be
created in it meanwhile, see :mod:`..semantics.crud`); once its own
finalizers are gone and nothing is left in it, the namespace itself goes.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import CONFIGMAPS_KEY, NAMESPACES_KEY, SERVICEACCOUNTS_KEY

ROOT_CA = "kube-root-ca.crt"
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the "
    "internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes "
    "clusters.")


class NamespaceDefaults:
    """Gives every live namespace its ``default`` ServiceAccount and ``kube-root-ca.crt`` ConfigMap."""

    def __init__(self, view: ClusterView, ca_pem: str) -> None:
        self.view = view
        self.ca_pem = ca_pem

    def ensure(self, namespace: str) -> None:
        ns = self.view.peek((NAMESPACES_KEY, "", namespace))
        if ns is None or objects.deleting(ns):
            return
        if self.view.peek((SERVICEACCOUNTS_KEY, namespace, "default")) is None:
            self.view.create(SERVICEACCOUNTS_KEY, namespace, {
                "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": namespace}})
        if self.ca_pem and self.view.peek((CONFIGMAPS_KEY, namespace, ROOT_CA)) is None:
            self.view.create(CONFIGMAPS_KEY, namespace, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": ROOT_CA, "namespace": namespace,
                             "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}},
                "data": {"ca.crt": self.ca_pem}})

    def gone(self, skey: str, obj: dict[str, Any]) -> None:
        """A default object was deleted: put it back (unless its namespace is going)."""
        wanted = {SERVICEACCOUNTS_KEY: "default", CONFIGMAPS_KEY: ROOT_CA}.get(skey)
        if wanted is not None and objects.name(obj) == wanted:
            namespace = objects.namespace(obj)
            self.view.soon("namespace-defaults", (NAMESPACES_KEY, "", namespace), self.ensure, namespace)


class NamespaceController:
    """Empties terminating namespaces, then removes them."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def terminate(self, namespace: str) -> None:
        """Delete everything in the namespace, then finish it if nothing is left."""
        for key in self.view.index.in_namespace(namespace):
            info = self.view.info(key[0])
            if info is not None and info.namespaced:
                self.view.delete(key)
        self.finish(namespace)

    def finish(self, namespace: str) -> None:
        """Remove a terminating namespace that has no finalizer and no object left."""
        ns_info = self.view.info(NAMESPACES_KEY)
        ns = self.view.api.store.peek(NAMESPACES_KEY, "", namespace)
        if ns_info is None or ns is None or not objects.deleting(ns):
            return
        if objects.finalizers(ns):
            return  # its own finalizers first; their removal brings us back here
        if not any(self.view.peek(key) is not None for key in self.view.index.in_namespace(namespace)):
            self.view.api.remove_now(ns_info, ns)
