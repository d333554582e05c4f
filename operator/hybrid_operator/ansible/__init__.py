"""The Ansible side: playbook and role kinds reconciled the way the Operator SDK's Ansible operator does.

The reconciler (finalizers, annotations, one status write per phase), the extra vars an SDK
playbook expects, the runner contract (:mod:`.runs`) and its ansible-runner adapter (:mod:`.runner`,
the only importer of ``ansible_runner``), job events to results, per-CR artifacts, the ownership
proxy every run talks to, the Ansible status shape, and the ``operator_sdk.util`` collection
shipped as data in ``collections/``.
"""
