"""Runners: the code that turns one reconcile of one custom resource into one Ansible run and its result.

``base`` defines the contract every runner implements (:class:`~hybrid_operator.runners.base.Runner`,
``RunRequest`` in, ``RunResult`` out), so the reconciler never knows which runner it talks to;
``ansible`` is the adapter around ansible-runner (the only module importing ``ansible_runner``);
``events`` turns ansible-runner job events into a ``RunResult`` (shared by every Ansible runner);
``artifacts`` owns the per-CR artifact directories and their rotation.
"""
