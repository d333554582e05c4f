"""Controllers: from watch events to reconciles, as controller-runtime's ``pkg/controller`` does it.

The event source (:mod:`.source`, the only kopf importer), the event filter (:mod:`.predicates`),
the deduplicating, delaying work queue (:mod:`.workqueue`), one :class:`.controller.Controller` per
watch, the reconcile contract (:mod:`.reconcile`), dependents and triggers that bring owners back
(:mod:`.dependents`, :mod:`.triggers`), status conditions (:mod:`.conditions`) and the metrics every
controller records (:mod:`.metrics`). It knows kinds and keys, never playbooks or charts.
"""
