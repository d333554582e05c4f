"""Fakes that record: a clock, a Runner, a Helm client and a cluster client for fast reconcile tests.

Each fake stands in for one real component behind the interface the operator already uses
(:class:`hybrid_operator.controller.workqueue.Clock`, :class:`hybrid_operator.ansible.runs.Runner`,
:class:`hybrid_operator.helm.client.HelmClient`, :class:`hybrid_operator.kube.client.ClusterClient`).
They record every call, and they never decide an outcome a real component would decide beyond
what the test scripted: a Runner result, a helm answer or error is handed out in the order the test
gave it, and a call nobody scripted fails the test (:class:`Unscripted`). :class:`FakeCluster` is an
in-memory object store that keeps only the API server's bookkeeping (resourceVersions, uids,
``deletionTimestamp`` while finalizers remain), so that what the reconciler writes can be read back.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import heapq
import itertools
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybrid_operator import errors
from hybrid_operator.ansible.runs import CancelSignal, RunRequest, RunResult
from hybrid_operator.controller.reconcile import Outcome
from hybrid_operator.helm.client import (
    ActionOptions,
    DryRun,
    HelmError,
    HelmErrorKind,
    Release,
    ReleaseInfo,
    Revision,
)
from hybrid_operator.kube.client import ResourceRef


class Unscripted(AssertionError):
    """A fake was called for something the test did not script."""


# -- time ----------------------------------------------------------------------------------------


class FakeClock:
    """Monotonic time that moves only when the test calls :meth:`advance` (implements ``workqueue.Clock``)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self.now

    def __call__(self) -> float:
        """The clock as a plain ``() -> float`` (what leases, readiness and heap pacing take)."""
        return self.now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + max(0.0, seconds), next(self._order), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking sleepers in deadline order; the loop runs before and after each step."""
        await settle()
        target = self.now + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            at, _, future = heapq.heappop(self._sleepers)
            if future.done():
                continue
            self.now = max(self.now, at)
            future.set_result(None)
            await settle()
        self.now = target
        await settle()


async def settle(rounds: int = 50) -> None:
    """Let every task that can run without time passing run (no real time passes)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


# -- a reconciler -------------------------------------------------------------------------------


class FakeReconciler:
    """A :class:`hybrid_operator.controller.reconcile.Reconciler` that records keys and returns scripted outcomes.

    Outcomes are handed out in order; once they run out, every reconcile returns ``default``. An
    outcome that is an exception is raised. ``clock`` (optional) stamps each call with its time.
    """

    def __init__(self, *outcomes: Outcome | BaseException, default: Outcome | None = None,
                 clock: FakeClock | None = None) -> None:
        self.outcomes: deque[Outcome | BaseException] = deque(outcomes)
        self.default = default
        self.clock = clock
        self.calls: list[tuple[str, str]] = []
        self.times: list[float] = []

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        self.calls.append((namespace, name))
        if self.clock is not None:
            self.times.append(self.clock.monotonic())
        if self.outcomes:
            outcome = self.outcomes.popleft()
        elif self.default is not None:
            outcome = self.default
        else:
            raise Unscripted(f"FakeReconciler: no outcome scripted for reconcile {len(self.calls)}")
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


# -- the Runner ----------------------------------------------------------------------------------


class FakeRunner:
    """A :class:`hybrid_operator.ansible.runs.Runner` that records requests and returns scripted results.

    ``results`` are returned in order (one per run); running out of them fails the test. With
    ``hold()`` the next runs block until :meth:`release`, or until their ``cancel`` is set, in which
    case they return what the runner contract says a cancelled run returns.
    """

    def __init__(self, *results: RunResult) -> None:
        self.results: deque[RunResult] = deque(results)
        self.requests: list[RunRequest] = []
        self.started = asyncio.Event()
        self.closed = False
        self._released = asyncio.Event()
        self._released.set()

    def script(self, *results: RunResult) -> None:
        self.results.extend(results)

    def hold(self) -> None:
        """Make the next runs wait for :meth:`release` (or cancellation)."""
        self._released.clear()
        self.started.clear()

    def release(self) -> None:
        self._released.set()

    async def run(self, request: RunRequest, cancel: CancelSignal | None = None) -> RunResult:
        self.requests.append(request)
        self.started.set()
        while not self._released.is_set():
            if cancel is not None and cancel.is_set():
                return RunResult(cancelled=True, error="the run was cancelled")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), 0.001)
        if cancel is not None and cancel.is_set():
            return RunResult(cancelled=True, error="the run was cancelled")
        if not self.results:
            raise Unscripted(f"FakeRunner: no result scripted for run {len(self.requests)}")
        return self.results.popleft()

    async def close(self) -> None:
        self.closed = True


def succeeded(**counts: Any) -> RunResult:
    """A RunResult of a playbook that ran to its end (``ok``/``changed``/... as given)."""
    return RunResult(completion="2026-01-01T00:00:00.000000", **counts)


# -- helm ----------------------------------------------------------------------------------------


@dataclass
class Held:
    """A scripted answer handed out only once :attr:`release` is set (to test cancellation mid-call)."""

    answer: Any
    release: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class HelmCall:
    """One recorded call of :class:`FakeHelmClient`: the method and its arguments."""

    method: str
    name: str = ""
    namespace: str = ""
    args: Mapping[str, Any] = field(default_factory=dict)


class FakeHelmClient:
    """Same methods as :class:`hybrid_operator.helm.client.HelmClient`; answers come from scripts.

    :meth:`script` queues answers per method; an answer that is an exception is raised, a
    :class:`Held` one waits for its release first. The dry-run upgrade is scripted as
    ``"upgrade --dry-run"``, apart from real upgrades. Every call is recorded in :attr:`calls`
    (see :meth:`called`).
    """

    DRY_RUN = "upgrade --dry-run"

    def __init__(self) -> None:
        self.calls: list[HelmCall] = []
        self._answers: dict[str, deque[Any]] = defaultdict(deque)

    def script(self, method: str, *answers: Any) -> FakeHelmClient:
        self._answers[method].extend(answers)
        return self

    def called(self, *methods: str) -> list[str]:
        """The methods called, in order (only ``methods`` when given)."""
        return [c.method for c in self.calls if not methods or c.method in methods]

    def unused(self) -> dict[str, int]:
        """Scripted answers nobody asked for, per method."""
        return {method: len(queue) for method, queue in self._answers.items() if queue}

    async def _answer(self, call: HelmCall) -> Any:
        self.calls.append(call)
        queue = self._answers.get(call.method)
        if not queue:
            raise Unscripted(f"FakeHelmClient: unscripted {call.method} {call.name} ({dict(call.args)})")
        answer = queue.popleft()
        if isinstance(answer, Held):
            answer.started.set()
            await answer.release.wait()
            answer = answer.answer
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def version(self) -> str:
        return str(await self._answer(HelmCall("version")))

    async def show_chart(self, chart: Path) -> dict[str, Any]:
        answer: dict[str, Any] = await self._answer(HelmCall("show_chart", args={"chart": chart}))
        return answer

    async def history(self, name: str, namespace: str) -> list[Revision]:
        return list(await self._answer(HelmCall("history", name, namespace)))

    async def info(self, name: str, namespace: str, revision: int | None = None) -> ReleaseInfo:
        answer: ReleaseInfo = await self._answer(HelmCall("info", name, namespace, {"revision": revision}))
        return answer

    async def manifest(self, name: str, namespace: str, revision: int | None = None) -> str:
        return str(await self._answer(HelmCall("manifest", name, namespace, {"revision": revision})))

    async def install(self, name: str, namespace: str, chart: Path, values: Mapping[str, Any],
                      options: ActionOptions | None = None, *, cross_namespace: bool = False) -> Release:
        answer: Release = await self._answer(HelmCall("install", name, namespace,
                                                {"chart": chart, "values": values, "options": options,
                                                 "cross_namespace": cross_namespace}))
        return answer

    async def upgrade(self, name: str, namespace: str, chart: Path, values: Mapping[str, Any],
                      options: ActionOptions | None = None, *, dry_run: DryRun | None = None,
                      cross_namespace: bool = False) -> Release:
        method = self.DRY_RUN if dry_run is not None else "upgrade"
        answer: Release = await self._answer(HelmCall(method, name, namespace, {"chart": chart, "values": values,
                                                                         "options": options, "dry_run": dry_run,
                                                                         "cross_namespace": cross_namespace}))
        return answer

    async def rollback(self, name: str, namespace: str, revision: int, options: ActionOptions | None = None) -> None:
        await self._answer(HelmCall("rollback", name, namespace, {"revision": revision, "options": options}))

    async def uninstall(self, name: str, namespace: str, options: ActionOptions | None = None) -> bool:
        return bool(await self._answer(HelmCall("uninstall", name, namespace, {"options": options})))


def helm_error(kind: HelmErrorKind, message: str, command: str = "helm") -> HelmError:
    return HelmError(kind, message, command)


# -- the cluster ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """One recorded write of :class:`FakeCluster`: the verb, the object's kind/namespace/name, the body."""

    verb: str
    kind: str
    namespace: str
    name: str
    body: Any = None


@dataclass(frozen=True)
class Event:
    """One recorded ``post_event``."""

    involved: str
    type: str
    reason: str
    message: str


ObjectKey = tuple[str, str, str, str]  # group, kind, namespace, name


class FakeCluster:
    """The :class:`hybrid_operator.kube.client.ClusterClient` methods the reconcilers use, in memory.

    Kinds must be registered (:meth:`add_kind`) before :meth:`resolve` finds them; objects are
    stored with a resourceVersion that every write bumps, and a ``deletionTimestamp`` instead of
    removal while finalizers remain. Every write is recorded in :attr:`writes`, every Event in
    :attr:`events`. :meth:`fail` makes the next call of a method raise (a TemporaryError, say).
    """

    def __init__(self) -> None:
        self.kinds: dict[tuple[str, str, str], ResourceRef] = {}
        self.objects: dict[ObjectKey, dict[str, Any]] = {}
        self.writes: list[Write] = []
        self.events: list[Event] = []
        self.reads: list[tuple[str, str, str, str]] = []
        self._version = itertools.count(1)
        self._uids = itertools.count(1)
        self._failures: dict[str, deque[BaseException]] = defaultdict(deque)

    # -- test setup and inspection --------------------------------------------------------------

    def add_kind(self, group: str, version: str, kind: str, plural: str, *, namespaced: bool = True,
                 has_status: bool = True) -> ResourceRef:
        ref = ResourceRef(group, version, kind, plural, namespaced, has_status)
        self.kinds[(group, version, kind)] = ref
        return ref

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` (a copy) as the API server would create it: uid, resourceVersion, generation 1."""
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._version))
        self.objects[self._key_of(stored)] = stored
        return copy.deepcopy(stored)

    def fail(self, method: str, *errors_: BaseException) -> None:
        """The next calls of ``method`` raise these, in order."""
        self._failures[method].extend(errors_)

    def stored(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object (not a copy), by kind (any group)."""
        for (_, k, ns, n), obj in self.objects.items():
            if (k, ns, n) == (kind, namespace, name):
                return obj
        return None

    def writes_of(self, verb: str, name: str | None = None) -> list[Write]:
        return [w for w in self.writes if w.verb == verb and (name is None or w.name == name)]

    def status_patches(self, name: str | None = None) -> list[dict[str, Any]]:
        """The bodies of every ``patch_status`` so far (``{"status": ...}`` merge patches)."""
        return [w.body for w in self.writes_of("patch_status", name)]

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]

    # -- ClusterClient ---------------------------------------------------------------------------

    def resolve(self, group: str, version: str, kind: str) -> ResourceRef:
        self._maybe_fail("resolve")
        ref = self.kinds.get((group, version, kind))
        if ref is None:
            raise errors.TemporaryError(f"kind {kind} is not served in {group or 'core'}/{version}; "
                                        "is its CRD installed?", delay=5)
        return ref

    def get(self, ref: ResourceRef, namespace: str, name: str) -> dict[str, Any] | None:
        self._maybe_fail("get")
        self.reads.append(("get", ref.kind, namespace, name))
        found = self.objects.get(self._key(ref, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list(self, ref: ResourceRef, namespace: str = "") -> list[dict[str, Any]]:
        self._maybe_fail("list")
        self.reads.append(("list", ref.kind, namespace, ""))
        return [copy.deepcopy(obj) for (group, kind, ns, _), obj in sorted(self.objects.items())
                if (group, kind) == (ref.group, ref.kind) and (not namespace or ns == namespace)]

    def patch_status(self, ref: ResourceRef, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any] | None:
        self._maybe_fail("patch_status")
        self.writes.append(Write("patch_status", ref.kind, namespace, name, copy.deepcopy(patch)))
        stored = self.objects.get(self._key(ref, namespace, name))
        if stored is None:
            return None
        merged = merge_patch(stored, {"status": patch.get("status")})
        stored.clear()
        stored.update(merged)
        return self._bump(stored)

    def set_finalizer(self, ref: ResourceRef, obj: dict[str, Any], finalizer: str,
                      present: bool) -> dict[str, Any] | None:
        self._maybe_fail("set_finalizer")
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        if (finalizer in (meta.get("finalizers") or [])) == present:
            return obj
        self.writes.append(Write("set_finalizer", ref.kind, namespace, name, {finalizer: present}))
        stored = self.objects.get(self._key(ref, namespace, name))
        if stored is None:
            return None
        current = [f for f in stored["metadata"].get("finalizers") or [] if f != finalizer]
        stored["metadata"]["finalizers"] = [*current, finalizer] if present else current
        if not stored["metadata"]["finalizers"] and stored["metadata"].get("deletionTimestamp"):
            del self.objects[self._key(ref, namespace, name)]  # the last finalizer of a deleted object went
            return copy.deepcopy(stored)
        return self._bump(stored)

    def patch_metadata(self, ref: ResourceRef, namespace: str, name: str, metadata: dict[str, Any]) -> None:
        self._maybe_fail("patch_metadata")
        self.writes.append(Write("patch_metadata", ref.kind, namespace, name, copy.deepcopy(metadata)))
        stored = self.objects.get(self._key(ref, namespace, name))
        if stored is not None:
            stored["metadata"] = merge_patch(stored["metadata"], metadata)
            self._bump(stored)

    def apply(self, ref: ResourceRef, namespace: str, body: dict[str, Any], field_manager: str,
              force: bool = True) -> tuple[dict[str, Any], bool]:
        self._maybe_fail("apply")
        name = str(body["metadata"]["name"])
        self.writes.append(Write("apply", ref.kind, namespace, name,
                                 {"body": copy.deepcopy(body), "field_manager": field_manager, "force": force}))
        key = self._key(ref, namespace, name)
        existing = self.objects.get(key)
        if existing is None:
            created = copy.deepcopy(body)
            created["metadata"]["namespace"] = namespace if ref.namespaced else ""
            created["metadata"]["uid"] = f"uid-{next(self._uids)}"
            self.objects[key] = created
            return self._bump(created), True
        merged = merge_patch(existing, {k: v for k, v in body.items() if k not in ("apiVersion", "kind")})
        existing.clear()
        existing.update(merged)
        return self._bump(existing), False

    def delete(self, ref: ResourceRef, namespace: str, name: str) -> bool:
        self._maybe_fail("delete")
        self.writes.append(Write("delete", ref.kind, namespace, name))
        key = self._key(ref, namespace, name)
        stored = self.objects.get(key)
        if stored is None:
            return False
        if stored["metadata"].get("finalizers"):
            stored["metadata"].setdefault("deletionTimestamp", "2026-01-01T00:00:00Z")
            self._bump(stored)
        else:
            del self.objects[key]
        return True

    def post_event(self, obj: dict[str, Any], event_type: str, reason: str, message: str,
                   component: str = "hybrid-operator") -> None:
        meta = obj.get("metadata") or {}
        involved = f"{obj.get('kind', '')}/{meta.get('namespace', '')}/{meta.get('name', '')}"
        self.events.append(Event(involved, event_type, reason, message))

    # -- plumbing --------------------------------------------------------------------------------

    def _maybe_fail(self, method: str) -> None:
        queue = self._failures.get(method)
        if queue:
            raise queue.popleft()

    def _key(self, ref: ResourceRef, namespace: str, name: str) -> ObjectKey:
        return ref.group, ref.kind, namespace if ref.namespaced else "", name

    def _key_of(self, obj: Mapping[str, Any]) -> ObjectKey:
        group = str(obj.get("apiVersion", "")).rpartition("/")[0]
        meta = obj.get("metadata") or {}
        return group, str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", ""))

    def _bump(self, stored: dict[str, Any]) -> dict[str, Any]:
        stored["metadata"]["resourceVersion"] = str(next(self._version))
        return copy.deepcopy(stored)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``null`` removes a key, maps merge, anything else replaces)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged
