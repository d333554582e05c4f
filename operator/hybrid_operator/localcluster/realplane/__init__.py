"""The real local control plane: etcd, kube-apiserver and kube-controller-manager, built from the official
Go modules (``make kube``) and started on loopback by ``hybrid-operator cluster --control-plane real``.

``build`` knows where the binaries are cached; ``pki`` makes the certificates, keys and token of a data
dir; ``launcher`` starts, watches and stops the three processes. The embedded cluster stays the default.
"""
