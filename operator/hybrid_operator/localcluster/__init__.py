"""The embedded Kubernetes API server: a separate world inside the package.

It imports nothing from the operator, and the operator imports nothing from
it (only the CLI starts it): they only talk HTTP, exactly as the operator
talks to a real cluster.

Layers, each importing only from those below it, as kube-apiserver and
kube-controller-manager are built::

    server         lifecycle: data dir, token, TLS, kubeconfig, start and stop
    apiserver/     HTTP: routing, one handler per verb, discovery, Tables, protobuf, /scale, audit
    controllers/   kube-controller-manager, scheduler, kubelet: the simulated node, workloads making Pods,
                   endpoints, storage, garbage collection, namespaces
    semantics/     the API's rules: CRUD, metadata, schemas, defaulting, patches, apply, selectors
    storage/       SQLite objects, the resourceVersion, the change feed
    errors  resources  objects  clock  files  tls      shared by every layer

``apiserver`` and ``controllers`` are independent of each other: both act
through ``semantics`` (and follow ``storage``'s change feed).
"""
