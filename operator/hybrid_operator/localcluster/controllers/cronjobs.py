"""CronJobs start Jobs on their schedule, as kube-controller-manager's cronjob controller does.

Every minute (and whenever a CronJob changes) each CronJob whose schedule
came due since its ``lastScheduleTime`` (or its creation) gets one Job,
named ``<cronjob>-<scheduled time in minutes since the epoch>``, owned by
it, annotated with ``batch.kubernetes.io/cronjob-scheduled-timestamp``;
missed times collapse into the latest one.  ``concurrencyPolicy`` Forbid
skips a run while a Job is active, Replace deletes the active ones first;
a suspended CronJob starts nothing.  The status lists the active Jobs and
the last schedule and success times, and finished Jobs beyond the history
limits are deleted.  Jobs made with ``kubectl create job --from=cronjob/x``
are owned by the CronJob too and counted the same way.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.controllers import cron, jobs
from hybrid_operator.localcluster.controllers.events import EventRecorder
from hybrid_operator.localcluster.controllers.pods import controller_ref
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import CRONJOBS_KEY, JOBS_KEY

COMPONENT = "cronjob-controller"
SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def _job_ref(job: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Job", "namespace": objects.namespace(job), "name": objects.name(job),
            "uid": objects.uid(job), "apiVersion": "batch/v1"}


def _limit(cronjob: dict[str, Any], field: str, default: int) -> int:
    value = objects.dig(cronjob, "spec", field)
    return value if isinstance(value, int) and value >= 0 else default


class CronJobController:
    """Starts Jobs for CronJobs on schedule and keeps their status and history."""

    def __init__(self, view: ClusterView, events: EventRecorder) -> None:
        self.view = view
        self.events = events

    def start(self) -> None:
        self._tick_later()

    def _tick_later(self) -> None:
        now = clock.now()
        self.view.later(60.0 - now.second - now.microsecond / 1e6 + 0.05, self._tick)

    def _tick(self) -> None:
        for key in self.view.index.of_kind(CRONJOBS_KEY):
            cronjob = self.view.peek(key)
            if cronjob is not None:
                self.view.soon("cronjob", key, self.sync, cronjob)
        self._tick_later()

    def sync(self, seen: dict[str, Any]) -> None:
        key = (CRONJOBS_KEY, objects.namespace(seen), objects.name(seen))
        cronjob = self.view.peek(key)
        if cronjob is None or objects.uid(cronjob) != objects.uid(seen) or objects.deleting(cronjob):
            return
        owned = [job for job in self.view.owned(JOBS_KEY, objects.uid(cronjob)) if not objects.deleting(job)]
        scheduled = self._due(cronjob)
        if scheduled is not None and not self.view.terminating(objects.namespace(cronjob)):
            started = self._run(cronjob, owned, scheduled)
            if started is not None:
                owned.append(started)
        self._prune(cronjob, owned)
        self.view.set_status(key, self._status(cronjob, owned, scheduled))

    def _due(self, cronjob: dict[str, Any]) -> datetime | None:
        spec = cronjob.get("spec") or {}
        if spec.get("suspend") is True:
            return None
        try:
            schedule = cron.parse(str(spec.get("schedule") or ""), spec.get("timeZone"))
        except cron.ScheduleError:
            return None
        since = clock.parse_timestamp(objects.dig(cronjob, "status", "lastScheduleTime")) or \
            clock.parse_timestamp(objects.meta(cronjob).get("creationTimestamp"))
        if since is None:
            return None
        return cron.last_due(schedule, since, clock.now())

    def _run(self, cronjob: dict[str, Any], owned: list[dict[str, Any]], when: datetime) -> dict[str, Any] | None:
        active = [job for job in owned if not jobs.finished(job)]
        policy = objects.dig(cronjob, "spec", "concurrencyPolicy")
        if active and policy == "Forbid":
            return None
        if policy == "Replace":
            for job in active:
                self.view.delete((JOBS_KEY, objects.namespace(job), objects.name(job)))
                self.events.record(cronjob, COMPONENT, "SuccessfulDelete", f"Deleted job {objects.name(job)}")
        template = objects.dig(cronjob, "spec", "jobTemplate") or {}
        meta: dict[str, Any] = template["metadata"] if isinstance(template.get("metadata"), dict) else {}
        name = f"{objects.name(cronjob)}-{math.floor(when.timestamp() / 60)}"
        body = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": objects.namespace(cronjob),
                             "labels": dict(meta.get("labels") or {}),
                             "annotations": {**(meta.get("annotations") or {}),
                                             SCHEDULED_ANNOTATION: clock.rfc3339(when)},
                             "ownerReferences": [controller_ref(cronjob)]},
                "spec": template.get("spec") or {}}
        created = self.view.create(JOBS_KEY, objects.namespace(cronjob), body)
        if created is not None:
            self.events.record(cronjob, COMPONENT, "SuccessfulCreate", f"Created job {name}")
        return created

    def _prune(self, cronjob: dict[str, Any], owned: list[dict[str, Any]]) -> None:
        for outcome, field, default in (("Complete", "successfulJobsHistoryLimit", 3),
                                        ("Failed", "failedJobsHistoryLimit", 1)):
            done = sorted((job for job in owned if jobs.finished(job) == outcome),
                          key=lambda job: str(objects.meta(job).get("creationTimestamp", "")))
            for job in done[:max(0, len(done) - _limit(cronjob, field, default))]:
                self.view.delete((JOBS_KEY, objects.namespace(job), objects.name(job)))
                owned.remove(job)

    def _status(self, cronjob: dict[str, Any], owned: list[dict[str, Any]], scheduled: datetime | None) -> \
            dict[str, Any]:
        status = dict(cronjob.get("status") or {})
        if scheduled is not None:
            status["lastScheduleTime"] = clock.rfc3339(scheduled)
        active = sorted((job for job in owned if not jobs.finished(job)), key=objects.name)
        if active:
            status["active"] = [_job_ref(job) for job in active]
        else:
            status.pop("active", None)
        successes = [str(objects.dig(job, "status", "completionTime") or "") for job in owned
                     if jobs.finished(job) == "Complete"]
        latest = max((s for s in successes if s), default="")
        if latest and latest > str(status.get("lastSuccessfulTime") or ""):
            status["lastSuccessfulTime"] = latest
        return status
