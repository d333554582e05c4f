"""The simulated node's pure parts: what its Node, its kubelet, its scheduler and its provisioner write.

Two things play the simulated node: the embedded cluster's controllers
(:mod:`..controllers.node`, :mod:`..controllers.kubelet`, :mod:`..controllers.storage`), which write
through the cluster's own object API, and the node agent (:mod:`..nodeagent`), which writes over HTTP
to any API server. Both build every body and status they write here, from the objects they read, so
a Pod, a Node or a PersistentVolume looks the same whichever of them made it. Nothing here does I/O.
"""
