"""The operator process: wiring, lifecycle, leader election, health probes and metrics endpoints.

:mod:`.runtime` is the composition root of ``hybrid-operator run`` (the one place that knows every
concrete class: it builds the Ansible and Helm reconcilers side by side); :mod:`.operator` runs
every controller until SIGTERM/SIGINT and shuts down gracefully; :mod:`.leader` is Lease-based
leader election; :mod:`.health` and :mod:`.metrics` serve ``/healthz``, ``/readyz`` and
``/metrics``.
"""
