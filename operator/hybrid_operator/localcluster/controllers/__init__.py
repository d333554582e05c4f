"""Controllers: what kube-controller-manager would do in a real cluster, minus running pods.

Owns the reactions to stored changes, one controller per module: garbage
collection by ownerReferences, namespace termination, Deployments giving
themselves ReplicaSets, and readiness (workloads report the status a healthy
controller would, so ``kubectl wait``, ``helm --wait`` and Ansible's
``wait: true`` finish).  They follow the storage change feed and write only
through :mod:`..semantics`, like any other client, never to the store directly.
"""
