"""Jobs run Pods to completion, as kube-controller-manager's job controller does (roughly).

A Job keeps up to ``parallelism`` Pods active (``generateName``
``<job>-``, labelled ``batch.kubernetes.io/job-name``, ``job-name``,
``batch.kubernetes.io/controller-uid`` and ``controller-uid``) until
``completions`` of them succeeded (without ``completions``: until one did);
the simulated kubelet lets each exit 0 after a short run.  Then the Job gets
kube's ``SuccessCriteriaMet`` and ``Complete`` conditions, its
``completionTime`` and a ``Completed`` Event, and is deleted
``ttlSecondsAfterFinished`` later (2 s at the least) when that is set.  A suspended Job starts
no Pod.  Pods never fail here, so ``backoffLimit`` is never reached.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.controllers import pods
from hybrid_operator.localcluster.controllers.events import EventRecorder
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import JOBS_KEY, PODS_KEY

COMPONENT = "job-controller"
# kube's TTL-after-finished controller acts through a work queue, never in the same instant the Job
# finished: helm's hook watcher must see a ``ttlSecondsAfterFinished: 0`` Job Complete before it goes.
TTL_FLOOR = 2.0
DONE_MESSAGE = "Reached expected number of succeeded pods"


def job_labels(job: dict[str, Any]) -> dict[str, str]:
    name, uid = objects.name(job), objects.uid(job)
    return {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
            "controller-uid": uid, "job-name": name}


def finished(job: dict[str, Any]) -> str:
    """``Complete`` or ``Failed`` when the Job has that condition True, else ``""``."""
    for condition in objects.dig(job, "status", "conditions") or []:
        if isinstance(condition, dict) and condition.get("type") in ("Complete", "Failed") \
                and condition.get("status") == "True":
            return str(condition["type"])
    return ""


def _int(value: Any, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _wanted_active(job: dict[str, Any], succeeded: int) -> tuple[int, bool]:
    """How many Pods should be active, and whether the Job is complete."""
    spec = job.get("spec") or {}
    parallelism = _int(spec.get("parallelism"), 1) or 0
    completions = _int(spec.get("completions"), None)
    if completions is None:  # a work queue: done once one Pod succeeded
        return (0, True) if succeeded else (parallelism, False)
    remaining = max(completions - succeeded, 0)
    return min(parallelism, remaining), remaining == 0


def _complete(status: dict[str, Any], now: str) -> None:
    status["completionTime"] = now
    status["conditions"] = [
        {"type": kind, "status": "True", "reason": "CompletionsReached", "message": DONE_MESSAGE,
         "lastProbeTime": now, "lastTransitionTime": now} for kind in ("SuccessCriteriaMet", "Complete")]


def job_status(job: dict[str, Any], owned: list[dict[str, Any]], done: bool, suspended: bool) -> dict[str, Any]:
    """A Job's status from its Pods (kube omits the zero counts)."""
    now = clock.now_rfc3339()
    old = job.get("status") or {}
    live = [pod for pod in owned if pods.active(pod)]
    status: dict[str, Any] = {"startTime": old.get("startTime") or now} if not suspended else {}
    counts = {"active": len(live), "succeeded": sum(1 for pod in owned if pods.phase(pod) == "Succeeded"),
              "failed": sum(1 for pod in owned if pods.phase(pod) == "Failed")}
    status.update({k: v for k, v in counts.items() if v})
    status.update(ready=sum(1 for pod in live if pods.ready(pod)), terminating=0, uncountedTerminatedPods={})
    if done:
        _complete(status, now)
    elif old.get("conditions"):
        status["conditions"] = old["conditions"]
    return status


class JobController:
    """Starts each Job's Pods, counts them and completes the Job."""

    def __init__(self, view: ClusterView, events: EventRecorder) -> None:
        self.view = view
        self.events = events
        self._expiring: set[str] = set()

    def sync(self, seen: dict[str, Any]) -> None:
        key = (JOBS_KEY, objects.namespace(seen), objects.name(seen))
        job = self.view.peek(key)
        if job is None or objects.uid(job) != objects.uid(seen) or objects.deleting(job):
            return
        if finished(job):
            self._expire_later(job)
            return
        owned = self.view.owned(PODS_KEY, objects.uid(job))
        succeeded = sum(1 for pod in owned if pods.phase(pod) == "Succeeded")
        live = [pod for pod in owned if pods.active(pod)]
        wanted, complete = _wanted_active(job, succeeded)
        suspended = objects.dig(job, "spec", "suspend") is True
        if not complete and not suspended and not self.view.terminating(objects.namespace(job)):
            for _ in range(max(0, wanted - len(live))):
                self._create(job)
        done = complete and not live
        self.view.set_status(key, job_status(job, owned, done, suspended))
        if done:
            self.events.record(job, COMPONENT, "Completed", "Job completed")
            fresh = self.view.peek(key)
            if fresh is not None:
                self._expire_later(fresh)

    def _create(self, job: dict[str, Any]) -> None:
        pod = pods.from_template(job, objects.dig(job, "spec", "template"), labels=job_labels(job))
        created = self.view.create(PODS_KEY, objects.namespace(job), pod)
        if created is not None:
            self.events.record(job, COMPONENT, "SuccessfulCreate", f"Created pod: {objects.name(created)}")

    def _expire_later(self, job: dict[str, Any]) -> None:
        """``ttlSecondsAfterFinished``: delete the finished Job (and so its Pods) that long after it finished."""
        ttl = _int(objects.dig(job, "spec", "ttlSecondsAfterFinished"), None)
        done = clock.parse_timestamp(objects.dig(job, "status", "completionTime"))
        if ttl is None or done is None or objects.uid(job) in self._expiring:
            return
        self._expiring.add(objects.uid(job))
        delay = max(ttl - (clock.now() - done).total_seconds(), TTL_FLOOR)
        key = (JOBS_KEY, objects.namespace(job), objects.name(job))
        self.view.later(delay, self._expire, key, objects.uid(job))

    def _expire(self, key: tuple[str, str, str], uid: str) -> None:
        self._expiring.discard(uid)
        job = self.view.peek(key)
        if job is not None and objects.uid(job) == uid:
            self.view.delete(key, "Foreground")
