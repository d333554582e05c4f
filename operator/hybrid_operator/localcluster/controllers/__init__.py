"""Controllers: what kube-controller-manager, the scheduler and a kubelet would do in a real cluster.

Owns the reactions to stored changes, one controller per module: garbage
collection by ownerReferences, namespaces (termination, their default
ServiceAccount and root CA), the simulated node (:mod:`.node`) and its
scheduler and kubelet (:mod:`.kubelet`: Pods bound, running, finishing), the
workload controllers that make Pods (ReplicaSets, Deployments, StatefulSets,
DaemonSets, Jobs, CronJobs), Services' endpoints, storage (provisioning,
binding, protection finalizers), and, without the simulated node,
reported readiness (workloads report the status a healthy controller would,
so ``kubectl wait``, ``helm --wait`` and Ansible's ``wait: true`` finish).
They follow the storage change feed and write only through
:mod:`..semantics`, like any other client, never to the store directly.
"""
