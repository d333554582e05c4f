"""Namespace termination, as kube-controller-manager's namespace controller does it.

A namespace being deleted has its contents deleted (nothing new may be
created in it meanwhile, see :mod:`..semantics.crud`); once its own
finalizers are gone and nothing is left in it, the namespace itself goes.
"""

from __future__ import annotations

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import NAMESPACES_KEY


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
