"""The Events the controllers post, aggregated on the client side as client-go's recorder does.

kube-controller-manager's controllers post core/v1 Events through client-go's
``EventRecorder``, whose ``EventCorrelator`` turns a repeat of the same
object, type, reason and message into an update of the existing Event
(``count`` + 1, a new ``lastTimestamp``) instead of a new one.  This recorder
does the same from a bounded memory of the Events it posted; an Event that
went meanwhile (deleted, expired) is simply posted again.
"""

from __future__ import annotations

import collections
import time
from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import EVENTS_KEY

REMEMBERED = 4096


def involved(obj: dict[str, Any]) -> dict[str, Any]:
    """An ObjectReference to ``obj`` as an Event's ``involvedObject``."""
    meta = obj["metadata"]
    ref = {"kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
           "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", ""),
           "resourceVersion": meta.get("resourceVersion", "")}
    return {key: value for key, value in ref.items() if value}


class EventRecorder:
    """Posts Normal/Warning Events for one cluster's controllers."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self._posted: collections.OrderedDict[tuple[str, str, str, str], str] = collections.OrderedDict()

    def record(self, obj: dict[str, Any], component: str, reason: str, message: str,
               event_type: str = "Normal") -> None:
        """Post (or count again) the Event ``reason: message`` about ``obj`` from ``component``."""
        namespace = objects.namespace(obj) or "default"
        memory = (objects.uid(obj), event_type, reason, message)
        name = self._posted.get(memory)
        if name is not None and self._count_again(namespace, name):
            self._posted.move_to_end(memory)
            return
        now = clock.now_rfc3339()
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{objects.name(obj)}.{time.time_ns():x}", "namespace": namespace},
                "involvedObject": involved(obj), "reason": reason, "message": message,
                "source": {"component": component}, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                "type": event_type, "eventTime": None, "reportingComponent": component, "reportingInstance": ""}
        created = self.view.create(EVENTS_KEY, namespace, body)
        if created is None:
            return
        self._posted[memory] = objects.name(created)
        while len(self._posted) > REMEMBERED:
            self._posted.popitem(last=False)

    def _count_again(self, namespace: str, name: str) -> bool:
        key = (EVENTS_KEY, namespace, name)
        if self.view.peek(key) is None:
            return False

        def bump(event: dict[str, Any]) -> None:
            event["count"] = int(event.get("count") or 1) + 1
            event["lastTimestamp"] = clock.now_rfc3339()

        self.view.update(key, bump)
        return True
