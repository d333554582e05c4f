"""The reconcile algorithm for one object, independent of kopf and of the runner's insides.

A reconcile gets only a namespace and a name (controller-runtime's contract),
reads the object as it is now, and then: skips objects outside the watch's
selector; on deletion runs the finalizer and removes it only after success;
otherwise adds the finalizer, marks the status Running, runs the automation,
and writes the outcome (conditions, ``ansibleResult``, ``observedGeneration``,
the playbook's ``set_stats`` status) with one merge patch, plus an Event.  It
says when to look again: the reconcile period (annotation > watch > flag), a
``requeue_after`` from the playbook, or a retry after a failure.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from hybrid_operator import clock, errors
from hybrid_operator.ansible import artifacts, commandfile, credentials, extravars, status
from hybrid_operator.ansible.proxy import OwnerProxy
from hybrid_operator.ansible.runs import Runner, RunRequest, RunResult
from hybrid_operator.config import automation, bounds
from hybrid_operator.config.model import AnsibleWatch
from hybrid_operator.config.settings import Settings, split_ansible_args
from hybrid_operator.config.values import annotation_duration
from hybrid_operator.controller import conditions, triggers
from hybrid_operator.controller.metrics import OperatorMetrics, gvk_label
from hybrid_operator.controller.reconcile import Outcome, OutOfRange, OwnWrites, RunCancel
from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ClusterClient, ResourceRef

log = logging.getLogger(__name__)

ANNOTATION_PREFIX = "ansible.sdk.operatorframework.io/"
RECONCILE_PERIOD = ANNOTATION_PREFIX + "reconcile-period"
VERBOSITY = ANNOTATION_PREFIX + "verbosity"
MAX_RUNNER_ARTIFACTS = ANNOTATION_PREFIX + "max-runner-artifacts"

OUTPUT_VERBOSITY = 3
MAX_OUTPUT = 64 * 1024
REASON_SUCCEEDED = "ReconcileSucceeded"
REASON_FAILED = "ReconcileFailed"
#: the Event reason when a spec is refused before any run (extravars.refusals)
REASON_REFUSED = "SpecRefused"
#: the Warning Event when a play of the run matched no host (the run still counts as a success)
REASON_NO_HOSTS = "NoHostsMatched"


@dataclass(frozen=True)
class RunOptions:
    """Per-object settings read from annotations (with the watch and flags as fallbacks)."""

    period: timedelta
    verbosity: int
    max_artifacts: int
    #: what an annotation asked beyond its floor or ceiling, and what is used instead (config.bounds)
    out_of_range: tuple[str, ...] = ()


def run_options(obj: dict[str, Any], watch: AnsibleWatch, settings: Settings) -> RunOptions:
    """Read the SDK's annotations, each brought into its range (config.bounds); a malformed one raises
    PermanentError naming it."""
    annotations = objects.annotations(obj)
    notes = []
    period = watch.reconcile_period or settings.reconcile_period
    if RECONCILE_PERIOD in annotations:
        period, note = bounds.period(RECONCILE_PERIOD, annotation_duration(annotations, RECONCILE_PERIOD, period))
        notes.append(note)
    verbosity = settings.verbosity_for(watch.gvk)
    if VERBOSITY in annotations:
        text = str(annotations[VERBOSITY]).strip()
        if not text.isdigit():
            raise errors.PermanentError(f"annotation {VERBOSITY}: {text!r} is not a whole number (0-7)")
        verbosity, note = bounds.verbosity(VERBOSITY, int(text))
        notes.append(note)
    max_artifacts = watch.max_runner_artifacts
    if MAX_RUNNER_ARTIFACTS in annotations:
        text = str(annotations[MAX_RUNNER_ARTIFACTS]).strip()
        if not text.isdigit():
            raise errors.PermanentError(f"annotation {MAX_RUNNER_ARTIFACTS}: {text!r} is not a whole number")
        max_artifacts, note = bounds.runner_artifacts(MAX_RUNNER_ARTIFACTS, int(text), watch.max_runner_artifacts)
        notes.append(note)
    return RunOptions(period, verbosity, max_artifacts, tuple(note for note in notes if note))


class AnsibleReconciler:
    """Reconciles objects of one Ansible watch."""

    def __init__(self, watch: AnsibleWatch, cluster: ClusterClient, runner: Runner, settings: Settings,
                 slots: asyncio.Semaphore, kubeconfig: Path, env: dict[str, str],
                 proxy: OwnerProxy | None = None, *, metrics: OperatorMetrics | None = None,
                 cancel: RunCancel | None = None, own_writes: OwnWrites | None = None) -> None:
        self.watch = watch
        self.cluster = cluster
        self.runner = runner
        self.settings = settings
        self.slots = slots
        self.kubeconfig = kubeconfig
        self.env = env
        self.proxy = proxy
        self.metrics = metrics
        self.cancel = cancel or RunCancel()
        #: the states of our CRs that our own writes produced (their watch events start nothing)
        self.own_writes = own_writes if own_writes is not None else OwnWrites()
        self.gvk_label = gvk_label(watch.gvk.group, watch.gvk.version, watch.gvk.kind)
        #: the Warning Events about annotations out of range, once per resource and value
        self.out_of_range = OutOfRange()
        #: the variables the watch's automation sets itself (a spec may not override them), kept fresh
        self.own_variables = automation.OwnVariables(watch, settings.watches_file.absolute().parent,
                                                     settings.environ)

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        gvk = self.watch.gvk
        try:
            ref = await asyncio.to_thread(self.cluster.resolve, gvk.group, gvk.version, gvk.kind)
            obj = await asyncio.to_thread(self.cluster.get, ref, namespace, name)
        except errors.TemporaryError as exc:
            if not isinstance(exc, errors.Unreachable):  # an outage is logged once, by the client
                log.warning("reconcile deferred", extra={"kind": gvk.kind, "namespace": namespace, "cr": name,
                                                         "error": str(exc)})
            return Outcome(failed=True, retry_after=exc.delay)
        if obj is None:
            stub = {"apiVersion": gvk.api_version, "kind": gvk.kind, "metadata": {"namespace": namespace, "name": name}}
            artifacts.remove_artifacts(self.settings.artifacts, stub)
            return Outcome()
        labels = objects.labels(obj)
        if not self.watch.selector.matches(labels):
            return Outcome()
        try:
            options = run_options(obj, self.watch, self.settings)
        except errors.PermanentError as exc:
            await self._report_error(ref, obj, str(exc), REASON_FAILED)
            return Outcome(failed=True)
        await self.out_of_range.tell(self.cluster, obj, options.out_of_range)
        if objects.deleting(obj):
            return await self._finalize(ref, obj, options)
        return await self._reconcile_live(ref, obj, options)

    async def _report_error(self, ref: ResourceRef, obj: dict[str, Any], problem: str, reason: str) -> None:
        """The SDK's ``markError``: a Failure condition with ``problem`` and a Warning Event."""
        await self._write_status(ref, obj, lambda old: status.errored(old, problem, clock.now()), force=True)
        await asyncio.to_thread(self.cluster.post_event, obj, "Warning", reason, problem)

    async def _checked(self, ref: ResourceRef, obj: dict[str, Any]) -> dict[str, Any] | None:
        """``obj`` as checked -- a deep copy, which is what the run then receives -- or None when refused.

        A spec that would set Ansible's own variables or one the automation sets itself, has keys
        that could carry Jinja, or collides after snake_case is refused before anything else happens
        -- no finalizer, no Running condition, no run: the CR gets a Failure condition and a Warning
        Event naming the keys. Nothing is retried (a spec change brings the object back).
        """
        frozen = copy.deepcopy(obj)
        # off the event loop: the first call reads ansible-core's tables (importing ansible takes a
        # while) and walks the automation's files
        problems = await asyncio.to_thread(self._problems, frozen)
        if not problems:
            return frozen
        message = "the spec was refused, nothing was run: " + "; ".join(problems)
        log.warning("spec refused", extra={"kind": self.watch.gvk.kind, "namespace": objects.namespace(obj),
                                           "cr": objects.name(obj), "problems": problems})
        await self._report_error(ref, obj, message, REASON_REFUSED)
        return None

    def _problems(self, obj: dict[str, Any]) -> list[str]:
        return extravars.refusals(obj, self.watch, self.own_variables.current())

    async def _reconcile_live(self, ref: ResourceRef, obj: dict[str, Any], options: RunOptions) -> Outcome:
        checked = await self._checked(ref, obj)
        if checked is None:
            return Outcome()
        obj = checked
        finalizer = self.watch.finalizer
        if finalizer is not None:
            updated = await asyncio.to_thread(self.cluster.set_finalizer, ref, obj, finalizer.name, True)
            if updated is None:
                return Outcome()
            self.own_writes.record(updated)
            obj = updated
        if self.watch.manage_status:
            obj = await self._write_status(ref, obj, lambda old: status.running(old, clock.now())) or obj
        if obj is not checked:
            # A write answers with the object as it is now, whose spec may have changed since the
            # check: the run receives exactly the object that passed a check, so this one is checked too.
            checked = await self._checked(ref, obj)
            if checked is None:
                return Outcome()
        result = await self._run(checked, options, finalizer=False)
        return await self._record(ref, checked, result, options)

    async def _finalize(self, ref: ResourceRef, obj: dict[str, Any], options: RunOptions) -> Outcome:
        finalizer = self.watch.finalizer
        finalizers = objects.finalizers(obj)
        if finalizer is None or finalizer.name not in finalizers:
            return Outcome()
        checked = await self._checked(ref, obj)
        if checked is None:
            return Outcome()
        obj = checked
        result = await self._run(obj, options, finalizer=True)
        if not result.succeeded:
            return await self._record(ref, obj, result, options, finalizer=True)
        fresh = await asyncio.to_thread(self.cluster.get, ref, objects.namespace(obj), objects.name(obj)) or obj
        self.own_writes.record(await asyncio.to_thread(self.cluster.set_finalizer, ref, fresh, finalizer.name, False))
        self._log_run(obj, result, "finalized", finalizer=True)
        artifacts.remove_artifacts(self.settings.artifacts, obj)
        return Outcome()

    async def _run(self, obj: dict[str, Any], options: RunOptions, *, finalizer: bool) -> RunResult:
        """Run the automation; through the ownership proxy (a per-run token) when there is one."""
        if self.proxy is None:
            return await self._run_with(obj, options, finalizer, self.kubeconfig)
        run = self.proxy.register_run(obj)
        try:
            async with credentials.run_kubeconfig(self.settings.artifacts, run.kubeconfig_text()) as path:
                return await self._run_with(obj, options, finalizer, path)
        finally:
            self.proxy.unregister_run(run.token)

    async def _run_with(self, obj: dict[str, Any], options: RunOptions, finalizer: bool,
                        kubeconfig: Path) -> RunResult:
        extra: dict[str, Any] = {}
        if self.watch.triggers:
            found = await asyncio.to_thread(triggers.related_objects, self.cluster, obj, self.watch.triggers)
            found, left_out = extravars.related_without_unsafe_keys(found)
            if left_out:
                log.warning("related objects left out", extra={
                    "kind": self.watch.gvk.kind, "namespace": objects.namespace(obj), "cr": objects.name(obj),
                    "problems": left_out})
            # other people's objects: never templated either
            extra[extravars.RELATED_KEY] = extravars.mark_unsafe(found) if self.watch.mark_unsafe else found
        request = RunRequest(
            cr=obj,
            watch=self.watch,
            finalizer=finalizer,
            kubeconfig=kubeconfig,
            verbosity=options.verbosity,
            ansible_args=split_ansible_args(self.settings.ansible_args),
            artifacts_root=self.settings.artifacts,
            max_artifacts=options.max_artifacts,
            env=self.env,
            extra_vars=extra,
        )
        async with self.slots:
            result = await self._timed(request)
        if result.artifact_dir is not None:
            await asyncio.to_thread(commandfile.scrub_command_file, result.artifact_dir)
        if result.cancelled and self.cancel.is_set():
            result = replace(result, error=self.cancel.message())
        self._log_output(obj, result, options.verbosity)
        return result

    async def _timed(self, request: RunRequest) -> RunResult:
        """One run, counted in the runner metrics."""
        if self.metrics is None:
            return await self.runner.run(request, self.cancel)
        self.metrics.active_runs.add(1, "ansible")
        try:
            result = await self.runner.run(request, self.cancel)
        finally:
            self.metrics.active_runs.add(-1, "ansible")
        self.metrics.run_time.observe(result.duration, "ansible", self.watch.gvk.kind)
        self.metrics.sdk_reconciles.observe(result.duration, self.gvk_label)
        return result

    async def _record(self, ref: ResourceRef, obj: dict[str, Any], result: RunResult,
                      options: RunOptions, *, finalizer: bool = False) -> Outcome:
        generation = objects.generation(obj)
        stats_status = result.stats_data.get("status") if isinstance(result.stats_data, dict) else None
        counts = status.AnsibleResult(ok=result.ok, changed=result.changed, skipped=result.skipped,
                                      failures=result.failures,
                                      completion=status.format_completion(result.completion or ""))
        messages = [f"{task}: {message}" if task else message for task, message in result.failed_tasks]

        def compute(old: dict[str, Any] | None) -> dict[str, Any]:
            now = clock.now()
            new = status.merge_playbook_status(old, stats_status, now) if isinstance(stats_status, dict) \
                else dict(old or {})
            if not self.watch.manage_status and result.error is None:
                return new
            if result.error is not None:
                return status.errored(new, result.error, now)
            if not result.succeeded:
                return status.failed(new, counts, messages, now, generation)
            return status.succeeded(new, counts, now, generation)

        await self._write_status(ref, obj, compute, force=True)
        if result.unmatched_plays:
            await self._report_unmatched(obj, result)
        if self.metrics is not None:
            self.metrics.sdk_result.add(1, self.gvk_label, "succeeded" if result.succeeded else "failed")
        if result.succeeded:
            await asyncio.to_thread(self.cluster.post_event, obj, "Normal", REASON_SUCCEEDED,
                                    f"{'finalizer ' if finalizer else ''}run succeeded: ok={result.ok} "
                                    f"changed={result.changed}")
            self._log_run(obj, result, "succeeded", finalizer=finalizer)
            period = result.requeue_after or options.period
            seconds = period.total_seconds()
            return Outcome(requeue_after=seconds if seconds > 0 else None)
        reason = "; ".join(f"task {task!r} failed: {msg}" for task, msg in result.failed_tasks) \
            or result.error or "the run failed"
        await asyncio.to_thread(self.cluster.post_event, obj, "Warning", REASON_FAILED, reason)
        self._log_run(obj, result, "failed", finalizer=finalizer)
        return Outcome(failed=True)

    async def _report_unmatched(self, obj: dict[str, Any], result: RunResult) -> None:
        """Plays that matched no host ran nothing: the SDK counts the run as a success, silently; we say so."""
        message = ("play " + ", ".join(result.unmatched_plays) + " matched no host of the inventory and ran "
                   "nothing; check the play's hosts: and the inventory (ANSIBLE_INVENTORY)")
        log.warning("play matched no host", extra={"kind": self.watch.gvk.kind, "namespace": objects.namespace(obj),
                                                   "cr": objects.name(obj), "plays": list(result.unmatched_plays)})
        await asyncio.to_thread(self.cluster.post_event, obj, "Warning", REASON_NO_HOSTS, message)

    async def _write_status(self, ref: ResourceRef, obj: dict[str, Any], compute: Any,
                            force: bool = False) -> dict[str, Any] | None:
        """Compute the new status from the freshest object and write it with one merge patch."""
        current = obj
        if force:
            fresh = await asyncio.to_thread(self.cluster.get, ref, objects.namespace(obj), objects.name(obj))
            if fresh is None:
                return None
            current = fresh
        old = current.get("status")
        new = compute(old if isinstance(old, dict) else None)
        patch = conditions.status_patch(old if isinstance(old, dict) else None, new)
        if patch is None:
            return current
        namespace, name = objects.key(current)
        written = await asyncio.to_thread(self.cluster.patch_status, ref, namespace, name, patch)
        self.own_writes.record(written)
        return written

    def _log_output(self, obj: dict[str, Any], result: RunResult, verbosity: int) -> None:
        """Task output goes to the log: all of it with ``ANSIBLE_DEBUG_LOGS`` (as the SDK), its end at
        verbosity 3 and above (``-vvv``) or with ``--log-level debug``."""
        everything = self.settings.ansible_debug_logs
        if not everything and verbosity < OUTPUT_VERBOSITY and not log.isEnabledFor(logging.DEBUG):
            return
        if result.artifact_dir is None:
            return
        stdout = result.artifact_dir / "stdout"
        try:
            text = stdout.read_text(errors="replace")
        except OSError:
            return
        log.info("run output", extra={"kind": self.watch.gvk.kind, "namespace": objects.namespace(obj),
                                      "cr": objects.name(obj),
                                      "output": text if everything else text[-MAX_OUTPUT:]})

    def _log_run(self, obj: dict[str, Any], result: RunResult, outcome: str, *, finalizer: bool) -> None:
        log.info("run finished", extra={
            "kind": self.watch.gvk.kind, "namespace": objects.namespace(obj), "cr": objects.name(obj),
            "outcome": outcome, "finalizer": finalizer, "duration": round(result.duration, 3), "ok": result.ok,
            "changed": result.changed, "failed": result.failures, "error": result.error or "",
        })

