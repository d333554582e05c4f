"""The reconcile algorithm for a CR of a Helm watch: one release per CR, kept as the spec says.

Why this module exists: it is the Operator SDK's Helm reconciler (``compat-helm.md`` §2) rebuilt on
the helm v4 CLI, with its known failure modes fixed.  Per CR (release name = CR name, namespace =
CR namespace, values = spec with the watch's overrides):

* no release -> ``install`` (a failed install is uninstalled, ``ReleaseFailed/InstallError``);
* a release left ``pending-*`` by a killed process is recovered first (rolled back to the last
  deployed revision, or uninstalled when nothing was ever deployed) instead of blocking forever;
* the candidate manifest (a dry-run upgrade) differs from the deployed one -> ``upgrade`` with
  exactly these values (``--reset-values``, so ``spec: {}`` resets); a failed upgrade is rolled back
  once and reported as ``ReleaseFailed/UpgradeError``, then retried with backoff;
* unless the inputs (chart content + values, recorded as a label on the revision we made) are
  unchanged: then the chart renders differently for the same inputs (random values, ``lookup``),
  and instead of a new revision per resync the CR gets ``NondeterministicRender=True`` and an Event;
* otherwise drift repair: the deployed manifest's objects are re-applied with server-side apply as
  field manager ``helm`` (with helm's ownership labels/annotations), so deleted or edited objects
  come back without a new revision.

Deletion uninstalls the release behind the ``uninstall-release`` finalizer (the legacy
``uninstall-helm-release`` is honoured); with ``uninstall-wait`` the finalizer stays until every
manifest object is gone.  Status is written once per phase and only when it changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import yaml

from hybrid_operator import clock, errors
from hybrid_operator.config.model import HelmWatch
from hybrid_operator.config.settings import Settings
from hybrid_operator.config.values import annotation_duration, parse_bool
from hybrid_operator.controller import conditions
from hybrid_operator.controller.dependents import ChildKind
from hybrid_operator.controller.metrics import OperatorMetrics
from hybrid_operator.controller.reconcile import Outcome, RunCancel
from hybrid_operator.helm import status, values
from hybrid_operator.helm.client import DEPLOYED, PENDING, ActionOptions, HelmClient, HelmError, HelmErrorKind
from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ClusterClient, ResourceRef

log = logging.getLogger(__name__)

PREFIX = "helm.sdk.operatorframework.io/"
FINALIZER = PREFIX + "uninstall-release"
LEGACY_FINALIZER = PREFIX + "uninstall-helm-release"
UPGRADE_FORCE = PREFIX + "upgrade-force"
ROLLBACK_FORCE = PREFIX + "rollback-force"
UNINSTALL_WAIT = PREFIX + "uninstall-wait"
RECONCILE_PERIOD = PREFIX + "reconcile-period"

FIELD_MANAGER = "helm"
INPUTS_LABEL = "hybrid-operator.dev/inputs"
KEEP_POLICY = "helm.sh/resource-policy"

NONDETERMINISTIC = "NondeterministicRender"
REASON_SAME_INPUTS = "SameInputsDifferentManifest"
EVENT_OVERRIDE = "OverrideValuesInUse"
EVENT_RECOVERED = "ReleaseRecovered"
EVENT_DRIFT = "DriftRepaired"
UNINSTALL_WAIT_POLL = 1.0

@dataclass(frozen=True)
class HelmOptions:
    """What the CR's annotations ask of this reconcile (watch and flags as fallbacks)."""

    period: timedelta
    install: ActionOptions
    upgrade: ActionOptions
    rollback: ActionOptions
    uninstall: ActionOptions
    uninstall_wait: bool


def helm_options(obj: dict[str, Any], watch: HelmWatch, settings: Settings) -> HelmOptions:
    """Read the SDK's and helm-operator-plugins' annotations; a bad reconcile period raises PermanentError."""
    notes = objects.annotations(obj)
    period = annotation_duration(notes, RECONCILE_PERIOD, watch.reconcile_period or settings.reconcile_period)

    def action(verb: str, force: bool = False) -> ActionOptions:
        return ActionOptions(no_hooks=parse_bool(notes.get(f"{PREFIX}{verb}-disable-hooks", ""), False),
                             description=str(notes.get(f"{PREFIX}{verb}-description", "")), force=force)

    return HelmOptions(
        period=period,
        install=action("install"),
        upgrade=action("upgrade", parse_bool(notes.get(UPGRADE_FORCE, ""), False)),
        rollback=ActionOptions(force=parse_bool(notes.get(ROLLBACK_FORCE, ""), True)),
        uninstall=action("uninstall"),
        uninstall_wait=parse_bool(notes.get(UNINSTALL_WAIT, ""), False),
    )


def inputs_label(inputs: str, revision: int) -> str:
    """The label value tying an input digest to the revision made from it (labels survive user upgrades)."""
    return f"{inputs}-r{revision}"


def manifest_objects(manifest: str) -> list[dict[str, Any]]:
    """The objects of a rendered manifest (``kind: List`` expanded, empty documents dropped)."""
    found: list[dict[str, Any]] = []
    for document in yaml.safe_load_all(manifest):
        if not isinstance(document, dict):
            continue
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            found += [item for item in document["items"] if isinstance(item, dict)]
        else:
            found.append(document)
    return found


def with_helm_ownership(obj: dict[str, Any], release: str, namespace: str) -> dict[str, Any]:
    """``obj`` with the label and annotations helm adds when it applies (they are not in the manifest)."""
    meta = dict(objects.meta(obj))
    meta["labels"] = {**(meta.get("labels") or {}), "app.kubernetes.io/managed-by": "Helm"}
    meta["annotations"] = {**(meta.get("annotations") or {}), "meta.helm.sh/release-name": release,
                           "meta.helm.sh/release-namespace": namespace}
    return {**obj, "metadata": meta}


def _group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass(frozen=True)
class Current:
    """The revision the release is at (the last deployed one) and the newest revision number."""

    revision: int
    labels: dict[str, str]
    latest_revision: int


@dataclass
class Job:
    """One reconcile of one CR: the object as last read or written, and its options."""

    ref: ResourceRef
    obj: dict[str, Any]
    options: HelmOptions
    started: float

    @property
    def name(self) -> str:
        return objects.name(self.obj)

    @property
    def namespace(self) -> str:
        return objects.namespace(self.obj) or "default"

    @property
    def generation(self) -> int | None:
        value = objects.meta(self.obj).get("generation")
        return value if isinstance(value, int) else None

    def requeue(self) -> Outcome:
        seconds = self.options.period.total_seconds()
        return Outcome(requeue_after=seconds if seconds > 0 else None)


class HelmReconciler:
    """Reconciles the CRs of one Helm watch (implements :class:`hybrid_operator.reconciler.Reconciler`)."""

    def __init__(self, watch: HelmWatch, cluster: ClusterClient, helm: HelmClient, settings: Settings,
                 slots: asyncio.Semaphore, chart_digest: str, *, metrics: OperatorMetrics | None = None,
                 cancel: RunCancel | None = None) -> None:
        self.watch = watch
        self.cluster = cluster
        self.helm = helm
        self.settings = settings
        self.slots = slots
        self.chart_digest = chart_digest
        self.metrics = metrics
        self.cancel = cancel or RunCancel()
        self._wait_manifests: dict[tuple[str, str], str] = {}
        #: called with the resource and the kinds of its deployed manifest (dependent watches).
        self.on_children: Callable[[dict[str, Any], set[ChildKind]], Awaitable[None]] | None = None

    # -- entry point ---------------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        gvk = self.watch.gvk
        try:
            ref = await asyncio.to_thread(self.cluster.resolve, gvk.group, gvk.version, gvk.kind)
            obj = await asyncio.to_thread(self.cluster.get, ref, namespace, name)
        except errors.TemporaryError as exc:
            self._log("reconcile deferred", namespace, name, error=str(exc))
            return Outcome(failed=True, retry_after=exc.delay)
        if obj is None:
            self._wait_manifests.pop((namespace, name), None)
            return Outcome()
        if not self.watch.selector.matches(objects.labels(obj)):
            return Outcome()
        try:
            options = helm_options(obj, self.watch, self.settings)
        except errors.PermanentError as exc:
            job = Job(ref, obj, HelmOptions(timedelta(0), *(ActionOptions(),) * 4, False), time.monotonic())
            return await self._irreconcilable(job, str(exc))
        job = Job(ref, obj, options, time.monotonic())
        try:
            async with self.slots:
                return await self._cancellable(job)
        except errors.TemporaryError as exc:
            self._log("reconcile deferred", namespace, name, error=str(exc))
            return Outcome(failed=True, retry_after=exc.delay)

    async def _cancellable(self, job: Job) -> Outcome:
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
            return await self._irreconcilable(job, self.cancel.message())
        return work.result()

    # -- live CRs ------------------------------------------------------------------------------

    async def _reconcile_live(self, job: Job) -> Outcome:
        finalizers = objects.finalizers(job.obj)
        if FINALIZER not in finalizers and LEGACY_FINALIZER not in finalizers:
            updated = await asyncio.to_thread(self.cluster.set_finalizer, job.ref, job.obj, FINALIZER, True)
            if updated is None:
                return Outcome()
            job.obj = updated
        await self._write_status(job, lambda old: status.initialized(old, clock.now()))
        try:
            composed = values.compose(job.obj.get("spec"), self.watch.override_values)
        except values.ValuePathError as exc:
            return await self._irreconcilable(job, f"overrideValues: {exc}")
        inputs = values.inputs_digest(self.chart_digest, composed.values)
        try:
            current = await self._current_release(job)
        except HelmError as exc:
            return await self._irreconcilable(job, f"cannot read the state of release {job.name}: {exc.message}")
        if current is None:
            return await self._install(job, composed, inputs)
        try:
            candidate = await self.helm.upgrade(job.name, job.namespace, self.watch.chart, composed.values,
                                                job.options.upgrade, dry_run=self.watch.dry_run_option)
            deployed_manifest = await self.helm.manifest(job.name, job.namespace, current.revision)
        except HelmError as exc:
            if exc.kind is HelmErrorKind.RENDER:
                return await self._release_failed(job, status.REASON_UPGRADE_ERROR, exc.message)
            return await self._irreconcilable(job, f"dry-run upgrade of release {job.name} failed: {exc.message}")
        nondeterministic = False
        if candidate.manifest != deployed_manifest:
            if current.labels.get(INPUTS_LABEL) != inputs_label(inputs, current.revision):
                return await self._upgrade(job, composed, inputs, current)
            nondeterministic = True
        return await self._repair(job, deployed_manifest, candidate.notes, current.revision, nondeterministic)

    async def _current_release(self, job: Job) -> Current | None:
        """The deployed revision to compare against, after recovering an interrupted operation; None: install."""
        try:
            latest = await self.helm.info(job.name, job.namespace)
        except HelmError as exc:
            if exc.kind is HelmErrorKind.NOT_FOUND:
                return None
            raise
        if latest.status == DEPLOYED:
            return Current(latest.revision, latest.labels, latest.revision)
        history = await self.helm.history(job.name, job.namespace)
        deployed = [r.revision for r in history if r.status == DEPLOYED]
        if latest.status in PENDING:
            return await self._recover(job, latest.status, latest.revision, deployed[-1] if deployed else None)
        if not deployed:
            self._log("removing a release that was never deployed", job.namespace, job.name, status=latest.status)
            await self.helm.uninstall(job.name, job.namespace)
            return None
        info = await self.helm.info(job.name, job.namespace, deployed[-1])
        return Current(info.revision, info.labels, latest.revision)

    async def _recover(self, job: Job, state: str, revision: int, deployed: int | None) -> Current | None:
        """A pending-* revision no helm process will ever finish (we are the only writer of this key)."""
        if deployed is None:
            await self.helm.uninstall(job.name, job.namespace)
            message = f"release {job.name} was left {state} (revision {revision}); uninstalled it to install again"
        else:
            await self.helm.rollback(job.name, job.namespace, deployed, ActionOptions(force=False))
            message = (f"release {job.name} was left {state} (revision {revision}); rolled back to the last "
                       f"deployed revision {deployed}")
        self._log("recovered an interrupted release", job.namespace, job.name, status=state, revision=revision)
        await self._event(job, "Warning", EVENT_RECOVERED, message)
        if deployed is None:
            return None
        info = await self.helm.info(job.name, job.namespace)
        return Current(info.revision, info.labels, info.revision)

    async def _install(self, job: Job, composed: values.ComposedValues, inputs: str) -> Outcome:
        await self._post_overrides(job, composed)
        options = job.options.install
        options = ActionOptions(no_hooks=options.no_hooks, description=options.description,
                                labels={INPUTS_LABEL: inputs_label(inputs, 1)})
        try:
            release = await self.helm.install(job.name, job.namespace, self.watch.chart, composed.values, options)
        except HelmError as exc:
            if exc.kind is not HelmErrorKind.RENDER:
                await self._uninstall_quietly(job)
            return await self._release_failed(job, status.REASON_INSTALL_ERROR, exc.message)
        return await self._deployed(job, release.manifest, release.notes, status.REASON_INSTALL_SUCCESSFUL,
                                    "installed", release.revision)

    async def _upgrade(self, job: Job, composed: values.ComposedValues, inputs: str,
                       current: Current) -> Outcome:
        await self._post_overrides(job, composed)
        wanted = job.options.upgrade
        options = ActionOptions(no_hooks=wanted.no_hooks, description=wanted.description, force=wanted.force,
                                labels={INPUTS_LABEL: inputs_label(inputs, current.latest_revision + 1)})
        try:
            release = await self.helm.upgrade(job.name, job.namespace, self.watch.chart, composed.values, options)
        except HelmError as exc:
            message = exc.message + await self._rollback_failed_upgrade(job, current)
            return await self._release_failed(job, status.REASON_UPGRADE_ERROR, message)
        return await self._deployed(job, release.manifest, release.notes, status.REASON_UPGRADE_SUCCESSFUL,
                                    "upgraded", release.revision)

    async def _rollback_failed_upgrade(self, job: Job, current: Current) -> str:
        """One rollback to the revision we upgraded from, if the failed upgrade left a revision behind."""
        try:
            latest = await self.helm.info(job.name, job.namespace)
            if latest.revision <= current.revision or latest.status == DEPLOYED:
                return ""
            await self.helm.rollback(job.name, job.namespace, current.revision, job.options.rollback)
        except HelmError as exc:
            return f"; rollback to revision {current.revision} failed too: {exc.message}"
        return f"; rolled back to revision {current.revision}"

    async def _uninstall_quietly(self, job: Job) -> None:
        try:
            await self.helm.uninstall(job.name, job.namespace)
        except HelmError as exc:
            self._log("could not uninstall a failed install", job.namespace, job.name, error=exc.message)

    async def _repair(self, job: Job, manifest: str, notes: str, revision: int, nondeterministic: bool) -> Outcome:
        try:
            recreated = await self._apply_manifest(job, manifest)
        except errors.TemporaryError as exc:
            return await self._irreconcilable(job, f"drift repair of release {job.name} failed: {exc}",
                                              clear_release_failed=True)
        if recreated:
            await self._event(job, "Normal", EVENT_DRIFT, "re-created " + ", ".join(recreated))
        was_flagged = conditions.get_condition((job.obj.get("status") or {}).get("conditions") or [], NONDETERMINISTIC)
        reason = status.REASON_INSTALL_SUCCESSFUL if revision == 1 else status.REASON_UPGRADE_SUCCESSFUL
        if nondeterministic and was_flagged is None:
            await self._event(job, "Warning", NONDETERMINISTIC, _NONDETERMINISTIC_MESSAGE)
        outcome = "nondeterministic" if nondeterministic else "repaired" if recreated else "unchanged"
        return await self._deployed(job, manifest, notes, reason, outcome, revision, nondeterministic)

    async def _apply_manifest(self, job: Job, manifest: str) -> list[str]:
        """Server-side apply every object of the deployed manifest as helm; the ones that had to be created."""
        created: list[str] = []
        for item in manifest_objects(manifest):
            ref, namespace, name = await self._locate(item, job.namespace)
            body = with_helm_ownership(item, job.name, job.namespace)
            if ref.namespaced:
                body["metadata"]["namespace"] = namespace
            _, was_created = await asyncio.to_thread(self.cluster.apply, ref, namespace, body, FIELD_MANAGER, True)
            if was_created:
                created.append(f"{ref.kind} {name}")
        return created

    async def _locate(self, item: dict[str, Any], release_namespace: str) -> tuple[ResourceRef, str, str]:
        group, _, version = str(item.get("apiVersion") or "").rpartition("/")
        ref = await asyncio.to_thread(self.cluster.resolve, group, version, str(item.get("kind") or ""))
        meta = objects.meta(item)
        namespace = str(meta.get("namespace") or release_namespace) if ref.namespaced else ""
        return ref, namespace, str(meta.get("name") or "")

    # -- deletion ------------------------------------------------------------------------------

    async def _delete(self, job: Job) -> Outcome:
        ours = [f for f in (FINALIZER, LEGACY_FINALIZER) if f in (objects.finalizers(job.obj))]
        if not ours:
            return Outcome()
        key = (job.namespace, job.name)
        manifest = await self._manifest_to_wait_for(job) if job.options.uninstall_wait else ""
        try:
            await self.helm.uninstall(job.name, job.namespace, job.options.uninstall)
        except HelmError as exc:
            return await self._release_failed(job, status.REASON_UNINSTALL_ERROR, exc.message)
        wait = job.options.uninstall_wait
        await self._write_status(job, lambda old: status.uninstalled(old, clock.now(), keep_deployed_release=wait))
        if wait and manifest:
            self._wait_manifests[key] = manifest
            remaining = await self._remaining(job, manifest)
            if remaining:
                self._log("waiting for release objects to go", job.namespace, job.name,
                          remaining=", ".join(remaining))
                return Outcome(requeue_after=UNINSTALL_WAIT_POLL)
        self._wait_manifests.pop(key, None)
        for finalizer in ours:
            updated = await asyncio.to_thread(self.cluster.set_finalizer, job.ref, job.obj, finalizer, False)
            if updated is None:
                break
            job.obj = updated
        self._finished(job, "uninstalled")
        return Outcome()

    async def _manifest_to_wait_for(self, job: Job) -> str:
        release = (job.obj.get("status") or {}).get(status.DEPLOYED_RELEASE) or {}
        manifest = release.get("manifest") if isinstance(release, dict) else None
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

    # -- outcomes ------------------------------------------------------------------------------

    async def _deployed(self, job: Job, manifest: str, notes: str, reason: str, outcome: str, revision: int,
                        nondeterministic: bool = False) -> Outcome:
        digest = self.settings.helm_manifest_digest

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

        await self._write_status(job, compute)
        if self.on_children is not None:
            kinds = {ChildKind(*_group_version(str(item.get("apiVersion", ""))), str(item.get("kind", "")))
                     for item in manifest_objects(manifest) if item.get("kind")}
            await self.on_children(job.obj, kinds)
        self._finished(job, outcome, revision=revision)
        return job.requeue()

    async def _release_failed(self, job: Job, reason: str, message: str) -> Outcome:
        await self._write_status(
            job, lambda old: status.release_failed(old, reason, message, clock.now(), job.generation))
        await self._event(job, "Warning", reason, message)
        self._finished(job, "failed", error=message)
        return Outcome(failed=True)

    async def _irreconcilable(self, job: Job, message: str, *, clear_release_failed: bool = False) -> Outcome:
        await self._write_status(job, lambda old: status.irreconcilable(
            old, message, clock.now(), job.generation, clear_release_failed=clear_release_failed))
        await self._event(job, "Warning", status.REASON_RECONCILE_ERROR, message)
        self._finished(job, "irreconcilable", error=message)
        return Outcome(failed=True)

    # -- plumbing ------------------------------------------------------------------------------

    async def _write_status(self, job: Job, compute: Callable[[dict[str, Any] | None], dict[str, Any]]) -> None:
        old = job.obj.get("status")
        old = old if isinstance(old, dict) else None
        patch = conditions.status_patch(old, compute(old))
        if patch is None:
            return
        written = await asyncio.to_thread(self.cluster.patch_status, job.ref, str(objects.meta(job.obj).get("namespace")
                                                                                  or ""), job.name, patch)
        if written is not None:
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


_NONDETERMINISTIC_MESSAGE = (
    "the chart renders a different manifest from unchanged inputs (random values, lookup, dates); "
    "the deployed revision is kept and repaired instead of upgrading on every resync. Make the "
    "templates deterministic, or set dryRunOption: server if they use lookup")
