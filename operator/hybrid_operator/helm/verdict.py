"""One reconcile of a Helm CR: the :class:`Job` it works on, and the :class:`Verdict` it ends in.

Why this module exists: every path of :class:`hybrid_operator.helm.reconciler.HelmReconciler` ends
in a Verdict -- the whole status change, the Events, the outcome -- applied in one place, so a
reconcile writes the status at most once. The exceptions below are how the reconciler's helpers
report a state that decides the verdict (a release that is not ours, an install that raced).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator.controller.dependents import ChildKind
from hybrid_operator.controller.reconcile import Outcome
from hybrid_operator.helm.annotations import HelmOptions
from hybrid_operator.helm.client import HelmError
from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ResourceRef

StatusChange = Callable[[dict[str, Any] | None], dict[str, Any]]


@dataclass(frozen=True)
class Verdict:
    """How one reconcile ends; :meth:`HelmReconciler._conclude` applies it, in this order:

    one status write (``status``, computed from the status as it is then), the ``events``, the
    dependent kinds of ``manifest``, the removal of ``release_finalizers``, a "run finished" log
    line when ``result`` is set, and ``outcome`` for the controller.
    """

    outcome: Outcome
    result: str | None = None
    status: StatusChange | None = None
    events: tuple[tuple[str, str, str], ...] = ()
    manifest: str | None = None
    #: the dependent kinds of ``manifest`` when already known (spares parsing it again)
    kinds: frozenset[ChildKind] | None = None
    release_finalizers: tuple[str, ...] = ()
    #: key/values of the "run finished" log line (revision, error)
    details: Mapping[str, Any] = field(default_factory=dict)


class DryRunFailed(Exception):
    """The candidate (dry-run upgrade) or the deployed manifest could not be had."""

    def __init__(self, error: HelmError) -> None:
        self.error = error
        super().__init__(error.message)


class Foreign(Exception):
    """The release of this name was not made by this kind: nothing may change it."""


class AlreadyExists(Exception):
    """helm refused the install: a release of this name appeared since the state was read."""


def comparison_failed(error: BaseException) -> BaseException:
    """A helm failure of the dry-run or the manifest read as :class:`DryRunFailed`; anything else as is."""
    if not isinstance(error, HelmError):
        return error
    failed = DryRunFailed(error)
    failed.__cause__ = error
    return failed


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
