"""The reconcile algorithm for a CR of a Helm watch: one release per CR, kept as the spec says.

Why this module exists: it is the Operator SDK's Helm reconciler (``compat-helm.md`` §2) rebuilt on
the helm v4 CLI, with its known failure modes fixed.  Per CR (release name = CR name, namespace =
CR namespace, values = spec with the watch's overrides), helm's answers give the release's state
(:func:`hybrid_operator.helm.release.release_state`), and the state gives the action:

* needs-install -> ``install`` (a failed install is uninstalled, ``ReleaseFailed/InstallError``);
* pending (a ``pending-*`` revision left by a killed process) -> recovered first: rolled back to
  the last deployed revision, or uninstalled when nothing was ever deployed, instead of blocking
  forever; failed with nothing deployed -> uninstalled, then installed;
* needs-upgrade (the candidate manifest of a dry-run upgrade differs from the deployed one and the
  inputs changed) -> ``upgrade`` with exactly these values (``--reset-values``, so ``spec: {}``
  resets); a failed upgrade is rolled back once and reported as ``ReleaseFailed/UpgradeError``,
  then retried with backoff;
* unchanged -> drift repair: the deployed manifest's objects are re-applied with server-side apply
  as field manager ``helm`` (with helm's ownership labels/annotations), so deleted or edited objects
  come back without a new revision. Once a full reconcile found the deployed revision unchanged,
  later resyncs with the same inputs skip helm entirely (:mod:`hybrid_operator.helm.resync`: two
  reads of helm's release record, and only the drifted objects applied), unless the chart can read
  the cluster while rendering (``lookup``, :mod:`hybrid_operator.helm.chartscan`).
  When the manifests differ although the inputs (chart content +
  values, recorded as a label on the revision we made) did not change, the chart renders
  differently for the same inputs (random values, ``lookup``): instead of a new revision per
  resync the CR gets ``NondeterministicRender=True`` and an Event.

Deletion uninstalls the release behind the ``uninstall-release`` finalizer (the legacy
``uninstall-helm-release`` is honoured); with ``uninstall-wait`` the finalizer stays until every
manifest object is gone.

Only releases this kind made are ever changed (:mod:`hybrid_operator.helm.ownership`): a release of
the same name made by another kind or by hand is reported (``Irreconcilable``, naming its owner),
never upgraded, recovered or uninstalled, and deleting the resource leaves it in place. An install
that finds the release already made (by a helm process that raced this one) reads the state again.

Every path ends in a :class:`Verdict` (the whole status change, the Events, the outcome), and
:meth:`HelmReconciler._conclude` applies it: the status is written once per reconcile, and only when
it changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from hybrid_operator import clock, errors
from hybrid_operator.config.model import HelmWatch
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller import conditions
from hybrid_operator.controller.dependents import ChildKind, ReleaseOwners
from hybrid_operator.controller.metrics import OperatorMetrics
from hybrid_operator.controller.reconcile import Outcome, OutOfRange, OwnWrites, RunCancel
from hybrid_operator.helm import ownership, release, status, values, verdict
from hybrid_operator.helm.annotations import (
    FINALIZER,
    LEGACY_FINALIZER,
    NO_OPTIONS,
    PREFIX,
    HelmOptions,
    helm_options,
)
from hybrid_operator.helm.chartscan import ChartScan, scan_chart
from hybrid_operator.helm.client import (
    DEPLOYED,
    ActionOptions,
    HelmClient,
    HelmError,
    HelmErrorKind,
    Release,
    ReleaseInfo,
)
from hybrid_operator.helm.manifests import (
    KEEP_POLICY,
    child_kinds,
    manifest_objects,
    with_helm_ownership,
)
from hybrid_operator.helm.release import INPUTS_LABEL, Phase, ReleaseState, inputs_label
from hybrid_operator.helm.resync import Desired, Repaired, Resyncer, storage_kind
from hybrid_operator.helm.verdict import Job, StatusChange, Verdict
from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ClusterClient, ResourceRef

__all__ = ["FINALIZER", "INPUTS_LABEL", "LEGACY_FINALIZER", "PREFIX", "HelmOptions", "HelmReconciler",
           "Verdict", "helm_options", "inputs_label", "manifest_objects", "with_helm_ownership"]

log = logging.getLogger(__name__)

NONDETERMINISTIC = "NondeterministicRender"
REASON_SAME_INPUTS = "SameInputsDifferentManifest"
EVENT_OVERRIDE = "OverrideValuesInUse"
EVENT_RECOVERED = "ReleaseRecovered"
EVENT_DRIFT = "DriftRepaired"
EVENT_NOT_OURS = "ReleaseNotOwned"
#: the Warning Event when the gate refused the rendered manifest (:mod:`hybrid_operator.helm.gate`)
EVENT_REFUSED = "ManifestRefused"
#: failures that leave nothing behind: the chart did not render, or the gate refused what it rendered
NOTHING_APPLIED = frozenset({HelmErrorKind.RENDER, HelmErrorKind.REFUSED})
FAILED = "failed"
UNINSTALL_WAIT_POLL = 1.0


class HelmReconciler:
    """Reconciles the CRs of one Helm watch (implements :class:`hybrid_operator.controller.reconcile.Reconciler`)."""

    def __init__(self, watch: HelmWatch, cluster: ClusterClient, helm: HelmClient, settings: Settings,
                 slots: asyncio.Semaphore, chart_digest: str, *, metrics: OperatorMetrics | None = None,
                 cancel: RunCancel | None = None, chart_name: str = "",
                 own_writes: OwnWrites | None = None, chart_scan: ChartScan | None = None) -> None:
        self.watch = watch
        self.cluster = cluster
        self.helm = helm
        self.settings = settings
        self.slots = slots
        self.chart_digest = chart_digest
        self.metrics = metrics
        self.cancel = cancel or RunCancel()
        self.chart_name = chart_name
        #: the owner label's value on every release this kind makes
        self.owner = ownership.owner_value(watch.gvk)
        #: where the releases this kind made are recorded (dependents map children to their maker)
        self.releases: ReleaseOwners | None = None
        #: the states of our CRs that our own writes produced (their watch events start nothing)
        self.own_writes = own_writes if own_writes is not None else OwnWrites()
        self._wait_manifests: dict[tuple[str, str], str] = {}
        #: the Warning Events about annotations out of range, once per resource and value
        self.out_of_range = OutOfRange()
        #: called with the resource and the kinds of its deployed manifest (dependent watches).
        self.on_children: Callable[[dict[str, Any], set[ChildKind]], Awaitable[None]] | None = None
        #: cheap no-change resyncs (its ``live`` is set to the dependent watches by the runtime)
        self.resyncer = Resyncer(cluster, chart_scan if chart_scan is not None else scan_chart(watch.chart),
                                 self.owner, storage_kind(settings.environ))

    # -- entry point ---------------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        gvk = self.watch.gvk
        try:
            ref = await asyncio.to_thread(self.cluster.resolve, gvk.group, gvk.version, gvk.kind)
            obj = await asyncio.to_thread(self.cluster.get, ref, namespace, name)
            if obj is None:
                self._wait_manifests.pop((namespace, name), None)
                self.resyncer.forget(namespace, name)
                return Outcome()
            if not self.watch.selector.matches(objects.labels(obj)):
                return Outcome()
            try:
                options = helm_options(obj, self.watch, self.settings)
            except errors.PermanentError as exc:
                job = Job(ref, obj, NO_OPTIONS, time.monotonic())
                return await self._conclude(job, self._irreconcilable(job, str(exc)))
            job = Job(ref, obj, options, time.monotonic())
            await self.out_of_range.tell(self.cluster, obj, options.out_of_range)
            async with self.slots:
                return await self._conclude(job, await self._cancellable(job))
        except errors.TemporaryError as exc:
            if not isinstance(exc, errors.Unreachable):  # an outage is logged once, by the client
                self._log("reconcile deferred", namespace, name, error=str(exc))
            return Outcome(failed=True, retry_after=exc.delay)

    async def _cancellable(self, job: Job) -> Verdict:
        """The helm work of one reconcile, stopped when runs are cancelled (graceful shutdown timeout)."""
        deleting = objects.deleting(job.obj)
        work = asyncio.ensure_future(self._delete(job) if deleting else self._reconcile_live(job))
        cancelled = asyncio.ensure_future(self.cancel.wait())
        started = time.monotonic()
        if self.metrics is not None:
            self.metrics.active_runs.add(1, "helm")
        try:
            await asyncio.wait({work, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
            if not work.done():
                work.cancel()  # helm gets SIGTERM, so the release is marked failed rather than left pending
                await asyncio.gather(work, return_exceptions=True)
            if self.metrics is not None:
                self.metrics.active_runs.add(-1, "helm")
                self.metrics.run_time.observe(time.monotonic() - started, "helm", self.watch.gvk.kind)
        if work.cancelled():
            return self._irreconcilable(job, self.cancel.message())
        return work.result()

    # -- live CRs ------------------------------------------------------------------------------

    async def _reconcile_live(self, job: Job) -> Verdict:
        finalizers = objects.finalizers(job.obj)
        if FINALIZER not in finalizers and LEGACY_FINALIZER not in finalizers:
            updated = await asyncio.to_thread(self.cluster.set_finalizer, job.ref, job.obj, FINALIZER, True)
            if updated is None:
                return Verdict(Outcome())
            self.own_writes.record(updated)
            job.obj = updated
        try:
            composed = values.compose(job.obj.get("spec"), self.watch.override_values)
        except values.ValuePathError as exc:
            return self._irreconcilable(job, f"overrideValues: {exc}")
        inputs = values.inputs_digest(self.chart_digest, composed.values)
        try:
            cheap = await self.resyncer.resync(job.namespace, job.name, composed.values, inputs)
        except errors.TemporaryError as exc:
            return self._irreconcilable(job, f"drift repair of release {job.name} failed: {exc}",
                                        clear_release_failed=True)
        if cheap is not None:
            return self._cheap_verdict(job, cheap)
        return await self._act(job, composed, inputs)

    def _cheap_verdict(self, job: Job, cheap: Repaired) -> Verdict:
        """The verdict of a resync that skipped the render: as drift repair of the verified revision."""
        record = cheap.record
        events = (("Normal", EVENT_DRIFT, "re-created " + ", ".join(cheap.created)),) if cheap.created else ()
        reason = status.REASON_INSTALL_SUCCESSFUL if record.revision == 1 else status.REASON_UPGRADE_SUCCESSFUL
        result = "nondeterministic" if record.nondeterministic else "repaired" if cheap.created else "unchanged"
        found = self._deployed(job, record.manifest, record.notes, reason, result, record.revision,
                               record.nondeterministic)
        return replace(found, events=events, kinds=record.kinds, details={**found.details, "render": "skipped"})

    async def _act(self, job: Job, composed: values.ComposedValues, inputs: str, *, again: bool = True) -> Verdict:
        """Read the release's state, then do what it needs (install, upgrade or repair)."""
        try:
            state = await self._settled_state(job, composed, inputs)
        except verdict.Foreign as exc:
            self._disown(job)
            return self._irreconcilable(job, str(exc))
        except verdict.DryRunFailed as exc:
            if exc.error.kind in NOTHING_APPLIED:
                return self._release_failed(job, status.REASON_UPGRADE_ERROR, exc.error.message,
                                            _event_reason(exc.error))
            return self._irreconcilable(job, f"dry-run upgrade of release {job.name} failed: {exc.error.message}")
        except HelmError as exc:
            return self._irreconcilable(job, f"cannot read the state of release {job.name}: {exc.message}")
        if state.phase is Phase.NEEDS_INSTALL:
            try:
                return await self._install(job, composed, inputs)
            except verdict.AlreadyExists as exc:
                if again:  # made meanwhile (by a helm process that raced ours): read the state again
                    self._log("release appeared during the install; reading its state again", job.namespace,
                              job.name)
                    return await self._act(job, composed, inputs, again=False)
                return self._irreconcilable(job, f"cannot install release {job.name}: {exc}")
        if state.phase is Phase.NEEDS_UPGRADE:
            return await self._upgrade(job, composed, inputs, state)
        return await self._repair(job, state, inputs)

    async def _settled_state(self, job: Job, composed: values.ComposedValues, inputs: str) -> ReleaseState:
        """The release's state once an interrupted operation is recovered and a failed install removed.

        Raises HelmError when helm cannot say, :class:`verdict.DryRunFailed` when the candidate cannot be had,
        :class:`verdict.Foreign` when the release is not ours (before anything touched it).
        """
        state = await self._observe(job, composed, inputs)
        if state.phase is Phase.PENDING:
            state = await self._recover(job, state, composed, inputs)
        if state.phase is Phase.FAILED:
            self._log("removing a release that was never deployed", job.namespace, job.name,
                      status=state.latest_status)
            await self.helm.uninstall(job.name, job.namespace)
            state = ReleaseState(Phase.NEEDS_INSTALL)
        return state

    async def _observe(self, job: Job, composed: values.ComposedValues, inputs: str) -> ReleaseState:
        """Ask helm what it knows of the release (and render the candidate when there is one to compare)."""
        latest = await self._latest(job)
        if latest is not None:
            self._check_ours(latest)
        history = [] if latest is None or latest.status == DEPLOYED else \
            await self.helm.history(job.name, job.namespace)
        revision = release.comparable_revision(latest, history)
        comparison = None
        if latest is not None and revision is not None:
            deployed = latest if revision == latest.revision else \
                await self.helm.info(job.name, job.namespace, revision)
            candidate, manifest = await self._candidate(job, composed, revision)
            comparison = release.Comparison(deployed, manifest, candidate)
        return release.release_state(latest, history, comparison, inputs)

    async def _candidate(self, job: Job, composed: values.ComposedValues, revision: int) -> tuple[Release, str]:
        """The dry-run upgrade with today's values and the manifest of ``revision``, asked of helm at once.

        Both are needed on every resync of a deployed release and neither depends on the other, so
        the two helm processes overlap. A failure of the dry-run is reported before one of the read.
        """
        candidate, manifest = await asyncio.gather(
            self.helm.upgrade(job.name, job.namespace, self.watch.chart, composed.values, job.options.upgrade,
                              dry_run=self.watch.dry_run_option, cross_namespace=self.watch.allow_cross_namespace),
            self.helm.manifest(job.name, job.namespace, revision),
            return_exceptions=True)
        if isinstance(candidate, BaseException):
            raise verdict.comparison_failed(candidate)
        if isinstance(manifest, BaseException):
            raise verdict.comparison_failed(manifest)
        return candidate, manifest

    async def _recover(self, job: Job, state: ReleaseState, composed: values.ComposedValues,
                       inputs: str) -> ReleaseState:
        """A pending-* revision no helm process will ever finish (we are the only writer of this key)."""
        pending, revision, deployed = state.latest_status, state.latest_revision, state.deployed_revision
        if deployed is None:
            await self.helm.uninstall(job.name, job.namespace)
            message = f"release {job.name} was left {pending} (revision {revision}); uninstalled it to install again"
        else:
            await self.helm.rollback(job.name, job.namespace, deployed, ActionOptions(force=False))
            message = (f"release {job.name} was left {pending} (revision {revision}); rolled back to the last "
                       f"deployed revision {deployed}")
        self._log("recovered an interrupted release", job.namespace, job.name, status=pending, revision=revision)
        await self._event(job, "Warning", EVENT_RECOVERED, message)
        if deployed is None:
            return ReleaseState(Phase.NEEDS_INSTALL)
        recovered = await self._observe(job, composed, inputs)
        if recovered.phase is Phase.PENDING:
            raise HelmError(HelmErrorKind.IN_PROGRESS, f"revision {recovered.latest_revision} is "
                            f"{recovered.latest_status} again after the rollback", "helm rollback")
        return recovered

    async def _install(self, job: Job, composed: values.ComposedValues, inputs: str) -> Verdict:
        await self._post_overrides(job, composed)
        options = job.options.install
        options = ActionOptions(no_hooks=options.no_hooks, description=options.description,
                                labels={INPUTS_LABEL: inputs_label(inputs, 1), ownership.OWNER_LABEL: self.owner})
        try:
            installed = await self.helm.install(job.name, job.namespace, self.watch.chart, composed.values, options,
                                                cross_namespace=self.watch.allow_cross_namespace)
        except HelmError as exc:
            if exc.kind is HelmErrorKind.EXISTS:
                raise verdict.AlreadyExists(exc.message) from exc
            if exc.kind not in NOTHING_APPLIED:
                await self._remove_failed_install(job)
            return self._release_failed(job, status.REASON_INSTALL_ERROR, exc.message, _event_reason(exc))
        return self._deployed(job, installed.manifest, installed.notes, status.REASON_INSTALL_SUCCESSFUL,
                              "installed", installed.revision)

    async def _upgrade(self, job: Job, composed: values.ComposedValues, inputs: str, state: ReleaseState) -> Verdict:
        await self._post_overrides(job, composed)
        wanted = job.options.upgrade
        options = ActionOptions(no_hooks=wanted.no_hooks, description=wanted.description, force=wanted.force,
                                labels={INPUTS_LABEL: inputs_label(inputs, state.latest_revision + 1),
                                        ownership.OWNER_LABEL: self.owner})
        try:
            upgraded = await self.helm.upgrade(job.name, job.namespace, self.watch.chart, composed.values, options,
                                               cross_namespace=self.watch.allow_cross_namespace)
        except HelmError as exc:
            if exc.kind is HelmErrorKind.REFUSED:  # refused before helm stored or applied anything
                return self._release_failed(job, status.REASON_UPGRADE_ERROR, exc.message, EVENT_REFUSED)
            message = exc.message + await self._rollback_failed_upgrade(job, state)
            return self._release_failed(job, status.REASON_UPGRADE_ERROR, message)
        return self._deployed(job, upgraded.manifest, upgraded.notes, status.REASON_UPGRADE_SUCCESSFUL,
                              "upgraded", upgraded.revision)

    async def _rollback_failed_upgrade(self, job: Job, state: ReleaseState) -> str:
        """One rollback to the revision we upgraded from, if the failed upgrade left a revision behind."""
        target = state.deployed_revision
        if target is None:
            return ""
        try:
            latest = await self.helm.info(job.name, job.namespace)
            if latest.revision <= target or latest.status == DEPLOYED:
                return ""
            await self.helm.rollback(job.name, job.namespace, target, job.options.rollback)
        except HelmError as exc:
            return f"; rollback to revision {target} failed too: {exc.message}"
        return f"; rolled back to revision {target}"

    async def _remove_failed_install(self, job: Job) -> None:
        """Uninstall what a failed install left: only a ``failed`` release of ours (a release another
        helm process deployed or is still installing meanwhile is not ours to remove)."""
        try:
            latest = await self.helm.info(job.name, job.namespace)
            if latest.status != FAILED or ownership.claim(latest, self.owner, self.chart_name) is not None:
                return
            await self.helm.uninstall(job.name, job.namespace)
        except HelmError as exc:
            if exc.kind is not HelmErrorKind.NOT_FOUND:
                self._log("could not uninstall a failed install", job.namespace, job.name, error=exc.message)

    async def _repair(self, job: Job, state: ReleaseState, inputs: str) -> Verdict:
        comparison = state.comparison
        if comparison is None or state.deployed_revision is None:
            raise ValueError("drift repair needs the deployed revision")
        manifest = comparison.deployed_manifest
        try:
            applied = await self._apply_manifest(job, manifest)
        except errors.TemporaryError as exc:
            return self._irreconcilable(job, f"drift repair of release {job.name} failed: {exc}",
                                        clear_release_failed=True)
        recreated = [f"{item.kind.kind} {item.name}" for item, _, created in applied if created]
        await self.resyncer.remember(job.namespace, job.name, state.deployed_revision, inputs, manifest,
                                     comparison.candidate.notes, state.nondeterministic,
                                     [(item, written) for item, written, _ in applied])
        events: list[tuple[str, str, str]] = []
        if recreated:
            events.append(("Normal", EVENT_DRIFT, "re-created " + ", ".join(recreated)))
        was_flagged = conditions.get_condition((job.obj.get("status") or {}).get("conditions") or [], NONDETERMINISTIC)
        if state.nondeterministic and was_flagged is None:
            events.append(("Warning", NONDETERMINISTIC, _NONDETERMINISTIC_MESSAGE))
        revision = state.deployed_revision
        reason = status.REASON_INSTALL_SUCCESSFUL if revision == 1 else status.REASON_UPGRADE_SUCCESSFUL
        result = "nondeterministic" if state.nondeterministic else "repaired" if recreated else "unchanged"
        verdict = self._deployed(job, manifest, comparison.candidate.notes, reason, result, revision,
                                 state.nondeterministic)
        return replace(verdict, events=tuple(events))

    async def _apply_manifest(self, job: Job, manifest: str) -> list[tuple[Desired, dict[str, Any], bool]]:
        """Server-side apply every object of the deployed manifest as helm: each, as written, and whether new."""
        applied = []
        for item in await self.resyncer.desired(manifest, job.name, job.namespace):
            written, created = await self.resyncer.apply_object(item)
            applied.append((item, written, created))
        return applied

    async def _locate(self, item: dict[str, Any], release_namespace: str) -> tuple[ResourceRef, str, str]:
        group, version = objects.group_version(str(item.get("apiVersion") or ""))
        ref = await asyncio.to_thread(self.cluster.resolve, group, version, str(item.get("kind") or ""))
        meta = objects.meta(item)
        namespace = str(meta.get("namespace") or release_namespace) if ref.namespaced else ""
        return ref, namespace, str(meta.get("name") or "")

    # -- deletion ------------------------------------------------------------------------------

    async def _delete(self, job: Job) -> Verdict:
        ours = tuple(f for f in (FINALIZER, LEGACY_FINALIZER) if f in objects.finalizers(job.obj))
        if not ours:
            return Verdict(Outcome())
        key = (job.namespace, job.name)
        wait = job.options.uninstall_wait
        try:
            latest = await self._latest(job)
            refusal = None if latest is None else ownership.claim(latest, self.owner, self.chart_name)
            if refusal is not None:
                message = f"release {job.name} was left in place: {refusal}"
                self._log("release not ours, not uninstalled", job.namespace, job.name, error=refusal)
                return Verdict(Outcome(), "not owned", events=(("Warning", EVENT_NOT_OURS, message),),
                               release_finalizers=ours)
            manifest = await self._manifest_to_wait_for(job) if wait else ""
            if latest is not None:
                await self.helm.uninstall(job.name, job.namespace, job.options.uninstall)
        except HelmError as exc:
            return self._release_failed(job, status.REASON_UNINSTALL_ERROR, exc.message)
        self._disown(job)

        def uninstalled(old: dict[str, Any] | None) -> dict[str, Any]:
            return status.uninstalled(old, clock.now(), keep_deployed_release=wait)

        if wait and manifest:
            self._wait_manifests[key] = manifest
            remaining = await self._remaining(job, manifest)
            if remaining:
                self._log("waiting for release objects to go", job.namespace, job.name,
                          remaining=", ".join(remaining))
                return Verdict(Outcome(requeue_after=UNINSTALL_WAIT_POLL), status=uninstalled)
        self._wait_manifests.pop(key, None)
        return Verdict(Outcome(), "uninstalled", uninstalled, release_finalizers=ours)

    async def _latest(self, job: Job) -> ReleaseInfo | None:
        """The newest revision of the release of this name, None when there is none."""
        try:
            return await self.helm.info(job.name, job.namespace)
        except HelmError as exc:
            if exc.kind is HelmErrorKind.NOT_FOUND:
                return None
            raise

    def _check_ours(self, latest: ReleaseInfo) -> None:
        refusal = ownership.claim(latest, self.owner, self.chart_name)
        if refusal is not None:
            raise verdict.Foreign(refusal)

    def _disown(self, job: Job) -> None:
        self.resyncer.forget(job.namespace, job.name)
        if self.releases is not None:
            self.releases.forget(job.namespace, job.name, (self.watch.gvk.group, self.watch.gvk.kind))

    async def _manifest_to_wait_for(self, job: Job) -> str:
        deployed_release = (job.obj.get("status") or {}).get(status.DEPLOYED_RELEASE) or {}
        manifest = deployed_release.get("manifest") if isinstance(deployed_release, dict) else None
        if isinstance(manifest, str) and manifest:
            return manifest
        if (job.namespace, job.name) in self._wait_manifests:
            return self._wait_manifests[(job.namespace, job.name)]
        try:
            return await self.helm.manifest(job.name, job.namespace)
        except HelmError:
            return ""

    async def _remaining(self, job: Job, manifest: str) -> list[str]:
        """Objects of ``manifest`` that still exist (deleted again if nothing is deleting them)."""
        remaining = []
        for item in manifest_objects(manifest):
            if objects.annotations(item).get(KEEP_POLICY) == "keep":
                continue
            ref, namespace, name = await self._locate(item, job.namespace)
            live = await asyncio.to_thread(self.cluster.get, ref, namespace, name)
            if live is None:
                continue
            if not objects.deleting(live):
                await asyncio.to_thread(self.cluster.delete, ref, namespace, name)
            remaining.append(f"{ref.kind} {name}")
        return remaining

    # -- verdicts ------------------------------------------------------------------------------

    def _deployed(self, job: Job, manifest: str, notes: str, reason: str, result: str, revision: int,
                  nondeterministic: bool = False) -> Verdict:
        digest = self.settings.helm_manifest_digest
        if self.releases is not None:
            self.releases.record(job.namespace, job.name, (self.watch.gvk.group, self.watch.gvk.kind))

        def compute(old: dict[str, Any] | None) -> dict[str, Any]:
            now = clock.now()
            new = status.deployed(old, job.name, manifest, notes, reason, now, job.generation, store_digest=digest)
            listed = new.get(conditions.CONDITIONS) or []
            if nondeterministic:
                flag = conditions.Condition(NONDETERMINISTIC, conditions.TRUE, REASON_SAME_INPUTS,
                                            _NONDETERMINISTIC_MESSAGE, sparse=True)
                new[conditions.CONDITIONS] = conditions.set_condition(listed, flag, now)
            else:
                new[conditions.CONDITIONS] = conditions.remove_condition(listed, NONDETERMINISTIC)
            return new

        return Verdict(job.requeue(), result, compute, manifest=manifest, details={"revision": revision})

    def _release_failed(self, job: Job, reason: str, message: str, event_reason: str | None = None) -> Verdict:
        """``ReleaseFailed`` with the SDK's ``reason``; the Warning Event says ``event_reason`` (default: the same)."""
        def compute(old: dict[str, Any] | None) -> dict[str, Any]:
            return status.release_failed(old, reason, message, clock.now(), job.generation)

        return Verdict(Outcome(failed=True), "failed", compute, (("Warning", event_reason or reason, message),),
                       details={"error": message})

    def _irreconcilable(self, job: Job, message: str, *, clear_release_failed: bool = False) -> Verdict:
        def compute(old: dict[str, Any] | None) -> dict[str, Any]:
            return status.irreconcilable(old, message, clock.now(), job.generation,
                                         clear_release_failed=clear_release_failed)

        return Verdict(Outcome(failed=True), "irreconcilable", compute,
                       (("Warning", status.REASON_RECONCILE_ERROR, message),), details={"error": message})

    async def _conclude(self, job: Job, verdict: Verdict) -> Outcome:
        """Apply a verdict: the one status write of this reconcile, then Events, watches, finalizers, log."""
        if verdict.status is not None:
            await self._write_status(job, verdict.status)
        for event_type, reason, message in verdict.events:
            await self._event(job, event_type, reason, message)
        if verdict.manifest is not None and self.on_children is not None:
            kinds = set(verdict.kinds) if verdict.kinds is not None else child_kinds(verdict.manifest)
            await self.on_children(job.obj, kinds)
        for finalizer in verdict.release_finalizers:
            updated = await asyncio.to_thread(self.cluster.set_finalizer, job.ref, job.obj, finalizer, False)
            if updated is None:
                break
            self.own_writes.record(updated)
            job.obj = updated
        if verdict.result is not None:
            self._finished(job, verdict.result, **verdict.details)
        return verdict.outcome

    # -- plumbing ------------------------------------------------------------------------------

    async def _write_status(self, job: Job, compute: StatusChange) -> None:
        old = objects.status(job.obj)
        patch = conditions.status_patch(old, compute(old))
        if patch is None:
            return
        written = await asyncio.to_thread(self.cluster.patch_status, job.ref, objects.namespace(job.obj), job.name,
                                          patch)
        if written is not None:
            self.own_writes.record(written)
            job.obj = written

    async def _post_overrides(self, job: Job, composed: values.ComposedValues) -> None:
        for override in composed.overrides:
            message = values.override_message(override, self.settings.suppress_override_values)
            await self._event(job, "Warning", EVENT_OVERRIDE, message)

    async def _event(self, job: Job, event_type: str, reason: str, message: str) -> None:
        await asyncio.to_thread(self.cluster.post_event, job.obj, event_type, reason, message)

    def _finished(self, job: Job, outcome: str, **extra: Any) -> None:
        log.info("run finished", extra={"kind": self.watch.gvk.kind, "namespace": job.namespace, "cr": job.name,
                                        "outcome": outcome, "duration": round(time.monotonic() - job.started, 3),
                                        **extra})

    def _log(self, message: str, namespace: str, name: str, **extra: Any) -> None:
        log.warning(message, extra={"kind": self.watch.gvk.kind, "namespace": namespace, "cr": name, **extra})


def _event_reason(error: HelmError) -> str | None:
    """The Event reason of a failed render: ``ManifestRefused`` when the gate refused it, else the condition's."""
    return EVENT_REFUSED if error.kind is HelmErrorKind.REFUSED else None


_NONDETERMINISTIC_MESSAGE = (
    "the chart renders a different manifest from unchanged inputs (random values, lookup, dates); "
    "the deployed revision is kept and repaired instead of upgrading on every resync. Make the "
    "templates deterministic, or set dryRunOption: server if they use lookup")
