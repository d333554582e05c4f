"""Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Why this module exists: two replicas of the operator must never run playbooks for the same object
at once, and a standby must take over when the leader dies.  kopf's peering only pauses peers; it
is not leader election (``libraries.md``).  So every replica runs a :class:`LeaderElector`:

* a candidate reads the Lease every ``retry_period``; it takes the Lease when it is absent,
  released (no holder), or expired -- its record unchanged for ``lease_duration`` by this
  replica's own clock (clocks of different machines are never compared, as in client-go);
* the leader renews every ``retry_period``; when no renewal succeeded for ``renew_deadline``, or
  the Lease shows another holder, it has lost: ``on_stopped`` runs at once (the operator stops
  reconciling) and the replica becomes a candidate again;
* on shutdown :meth:`LeaderElector.release` hands the Lease back (no holder, 1 s duration), so a
  standby takes over within one ``retry_period`` instead of waiting for expiry.

Writes are guarded by the Lease's resourceVersion, so two candidates never both win.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hybrid_operator import clock, errors
from hybrid_operator.kube import objects

log = logging.getLogger(__name__)

SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class LeaseClient(Protocol):
    """What the elector needs from the cluster (``cluster.ClusterClient`` has it)."""

    def get_lease(self, namespace: str, name: str, timeout: float) -> dict[str, Any] | None: ...

    def write_lease(self, namespace: str, lease: dict[str, Any], timeout: float) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class ElectionConfig:
    """Which Lease, who we are, and the usual client-go durations (seconds)."""

    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise errors.ConfigurationError(
                "leader election needs lease duration > renew deadline > retry period > 0, got "
                f"{self.lease_duration:g}s, {self.renew_deadline:g}s, {self.retry_period:g}s")


def default_identity() -> str:
    """``<hostname>_<random>``: unique per process, readable in ``kubectl get lease``."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


def default_namespace(environ: dict[str, str] | None = None) -> str:
    """The namespace for the Lease: ``POD_NAMESPACE``, the service account's namespace, else ``default``."""
    env = os.environ if environ is None else environ
    if env.get("POD_NAMESPACE"):
        return env["POD_NAMESPACE"]
    with contextlib.suppress(OSError):
        found = Path(SA_NAMESPACE).read_text().strip()
        if found:
            return found
    return "default"


Callback = Callable[[], Awaitable[None]]


class LeaderElector:
    """Campaigns for one Lease and calls back when leadership starts and stops."""

    def __init__(self, client: LeaseClient, config: ElectionConfig, on_started: Callback, on_stopped: Callback,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.config = config
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.clock = clock
        self.leading = False
        #: monotonic time of the last successful read or write of the Lease (readiness of a standby)
        self.last_contact: float | None = None
        self._lease: dict[str, Any] | None = None
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0

    # -- state --------------------------------------------------------------------------------

    def healthy(self) -> bool:
        """The Lease was read or written within the lease duration: this replica can take over or lead."""
        return self.last_contact is not None and self.clock() - self.last_contact <= self.config.lease_duration

    # -- the campaign -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign, lead, and campaign again after a loss, until ``stop`` is set."""
        log.info("leader election started", extra={"lease": f"{self.config.namespace}/{self.config.name}",
                                                    "identity": self.config.identity})
        while not stop.is_set():
            if not self.leading:
                if await self._attempt(timeout=self.config.retry_period * 2):
                    await self._start()
                    continue
            elif not await self._renew():
                await self._lose()
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.retry_period)

    async def _renew(self) -> bool:
        """Renew until it works or the renew deadline passes; False when leadership is lost."""
        while True:
            remaining = self._last_renew + self.config.renew_deadline - self.clock()
            if remaining <= 0:
                log.warning("leader lease not renewed in time", extra={"deadline": self.config.renew_deadline})
                return False
            if await self._attempt(timeout=max(0.5, min(remaining, self.config.retry_period * 2))):
                return True
            holder = ((self._lease or {}).get("spec") or {}).get("holderIdentity")
            if holder and holder != self.config.identity:
                log.warning("leader lease taken by another replica", extra={"holder": holder})
                return False
            await asyncio.sleep(min(self.config.retry_period / 2, max(0.0, remaining)))

    async def _start(self) -> None:
        self.leading = True
        log.info("leadership acquired", extra={"lease": f"{self.config.namespace}/{self.config.name}",
                                               "identity": self.config.identity})
        await self.on_started()

    async def _lose(self) -> None:
        self.leading = False
        log.warning("leadership lost", extra={"lease": f"{self.config.namespace}/{self.config.name}"})
        await self.on_stopped()

    async def release(self) -> None:
        """Hand the Lease back (on shutdown) so a standby takes over at once."""
        if not self.leading or self._lease is None:
            return
        self.leading = False
        lease = _copy(self._lease)
        now = clock.micro_time()
        lease["spec"].update({"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": now,
                              "acquireTime": now})
        try:
            written = await asyncio.to_thread(self.client.write_lease, self.config.namespace, lease, 5.0)
        except errors.TemporaryError as exc:
            log.warning("leader lease not released", extra={"error": str(exc)})
            return
        if written is not None:
            log.info("leader lease released", extra={"lease": f"{self.config.namespace}/{self.config.name}"})

    # -- one attempt --------------------------------------------------------------------------

    async def _attempt(self, timeout: float) -> bool:
        """Read the Lease and take or renew it if we may; True when we hold it now."""
        try:
            current = await asyncio.to_thread(self.client.get_lease, self.config.namespace, self.config.name,
                                              timeout)
            self.last_contact = self.clock()
            if current is None:
                return await self._write(self._new_lease(), timeout)
            self._lease = current
            spec = current.get("spec") or {}
            self._observe(spec)
            if not self._may_take(spec):
                return False
            return await self._write(self._claim(current), timeout)
        except errors.TemporaryError as exc:
            log.debug("leader election attempt failed", extra={"error": str(exc)})
            return False

    async def _write(self, lease: dict[str, Any], timeout: float) -> bool:
        written = await asyncio.to_thread(self.client.write_lease, self.config.namespace, lease, timeout)
        if written is None:
            return False
        self.last_contact = self._last_renew = self.clock()
        self._lease = written
        self._observe(written.get("spec") or {})
        return True

    def _observe(self, spec: dict[str, Any]) -> None:
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"),
                  spec.get("leaseTransitions"), spec.get("leaseDurationSeconds"))
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()

    def _may_take(self, spec: dict[str, Any]) -> bool:
        holder = spec.get("holderIdentity")
        if not holder or holder == self.config.identity:
            return True
        duration = spec.get("leaseDurationSeconds") or self.config.lease_duration
        return self.clock() - self._observed_at > float(duration)

    def _seconds(self) -> int:
        return max(1, round(self.config.lease_duration))

    def _new_lease(self) -> dict[str, Any]:
        now = clock.micro_time()
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": {"holderIdentity": self.config.identity,
                         "leaseDurationSeconds": self._seconds(),
                         "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}

    def _claim(self, current: dict[str, Any]) -> dict[str, Any]:
        lease = _copy(current)
        spec = lease.setdefault("spec", {})
        now = clock.micro_time()
        if spec.get("holderIdentity") != self.config.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update({"holderIdentity": self.config.identity, "renewTime": now,
                     "leaseDurationSeconds": self._seconds()})
        return lease


def _copy(lease: dict[str, Any]) -> dict[str, Any]:
    return {**lease, "metadata": dict(objects.meta(lease)), "spec": dict(lease.get("spec") or {})}
