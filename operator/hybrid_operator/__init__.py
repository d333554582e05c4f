"""hybrid-operator: Ansible playbooks/roles and Helm charts as Kubernetes operators.

The package lives under ``operator/`` (which must never get an ``__init__.py``:
it would shadow the standard library's ``operator`` module).
"""

__version__ = "0.1.0"
