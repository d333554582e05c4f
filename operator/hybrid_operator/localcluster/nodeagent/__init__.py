"""The node agent: the simulated node as a plain API client, for API servers that have no kubelet.

The embedded cluster runs its simulated node inside itself (:mod:`..controllers`). A real control plane
(``hybrid-operator cluster --control-plane real``), or any cluster without nodes, has no kubelet and no
scheduler, so its Pods would stay Pending. The agent talks HTTP(S) to such a server with a kubeconfig,
as kwok does: it registers the same Node and keeps it Ready (:mod:`.node`), schedules Pods to it and
runs them (:mod:`.pods`), and provisions volumes for the default StorageClass it ensures
(:mod:`.storage`), writing the bodies and statuses of :mod:`..simnode`, so Pods look the same on both.
``hybrid-operator node --kubeconfig K`` runs it alone; the real control plane's launcher runs it in a
thread.
"""
