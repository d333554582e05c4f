"""One module per verb family, as kube-apiserver's ``endpoints/handlers``.

Each handler turns one parsed request (a :class:`~..urls.Target`, the
decoded body and options) into one call of the object API and encodes what
comes back; :mod:`..routing` picks the handler from the HTTP method and
whether the URL names an object.  :mod:`.discovery` serves the endpoints that
are not about objects (version, health, discovery, OpenAPI).
"""
