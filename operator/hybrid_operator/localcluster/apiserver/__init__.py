"""The HTTP layer of the embedded API server, shaped like kube-apiserver's ``endpoints``.

Owns everything that is about requests and responses rather than objects:
the aiohttp application and its routes, authentication, decoding what real
clients send (query flags, JSON/YAML/protobuf bodies, patch content types,
Accept headers), one handler module per verb family (get, list, create,
update, patch, delete, watch) as kube-apiserver's ``endpoints/handlers``,
discovery and OpenAPI documents, ``meta.k8s.io`` Tables for ``kubectl get``,
the ``/scale`` subresource view, and the audit log.  The object rules
themselves are in :mod:`..semantics`; handlers only translate.
"""
