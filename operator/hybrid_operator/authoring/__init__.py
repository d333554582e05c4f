"""Authoring tools that work offline: ``init``, ``create api`` and ``generate``.

Scaffolds projects and kinds from ``templates/``, and derives the deploy manifests of ``config/``
(CRDs, RBAC from what the automation touches, the manager) deterministically from the project.
No cluster client and no runner: everything here is files in, files out.
"""
