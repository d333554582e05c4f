"""The runner contract: what the reconciler hands to a runner, what it gets back, and how to cancel.

The reconciler depends only on this module, so the ansible-runner adapter can be replaced (by a
"warm" runner that forks a pre-imported interpreter, for instance) without touching any caller.

Cancellation contract (every :class:`Runner` honours it):

* ``cancel`` is anything with a thread-safe ``is_set()`` -- a :class:`threading.Event` or an
  :class:`asyncio.Event` (reading its flag from another thread is safe). The runner polls it from
  its worker thread at least every :data:`CANCEL_POLL_SECONDS`; the caller never has to call
  anything else.
* When it is set, the run's process tree is killed and ``run`` **returns** a :class:`RunResult`
  with ``cancelled=True`` and ``error`` saying so (it does not raise). A request cancelled before
  it started returns such a result without starting anything.
* When the awaiting task itself is cancelled (``asyncio.CancelledError``), the runner stops the
  run the same way, waits until its process is gone, then re-raises ``CancelledError``: no playbook
  keeps running after the caller has gone.
* ``close()`` cancels every run in flight, waits for them, and makes later ``run`` calls raise
  ``RuntimeError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from hybrid_operator.config.model import AnsibleWatch

CANCEL_POLL_SECONDS = 0.5
"""The longest time a runner may take to notice that ``cancel`` was set."""


class CancelSignal(Protocol):
    """Something whose ``is_set()`` may be called from any thread: threading.Event or asyncio.Event."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class RunRequest:
    """One run for one custom resource.

    ``cr`` is the object as read from the API (a plain dict); ``finalizer`` says this is the
    finalizer run of a CR being deleted. ``kubeconfig`` (the per-run proxy kubeconfig) becomes
    ``KUBECONFIG`` and ``K8S_AUTH_KUBECONFIG``; None leaves the operator's environment alone.
    ``ansible_args`` are extra ``ansible-playbook`` arguments (``--ansible-args``).
    Artifacts go under ``artifacts_root`` (see :mod:`hybrid_operator.runners.artifacts`);
    ``max_artifacts`` run directories are kept per CR, 0 keeping all. ``env`` overrides variables
    of the playbook's environment (including ``ANSIBLE_GATHERING``).
    """

    cr: Mapping[str, Any]
    watch: AnsibleWatch
    artifacts_root: Path
    finalizer: bool = False
    kubeconfig: Path | None = None
    verbosity: int = 0
    ansible_args: tuple[str, ...] = ()
    max_artifacts: int = 20
    env: Mapping[str, str] = field(default_factory=dict)
    #: added after the SDK's extra vars (e.g. ``_related``: the objects of the watch's triggers).
    extra_vars: Mapping[str, Any] = field(default_factory=dict)


class FailedTask(NamedTuple):
    """A task that failed and was neither ignored (``ignore_errors``) nor rescued."""

    task: str
    msg: str


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run, with the counts of host ``localhost`` (as the Operator SDK reports them).

    ``completion`` is the RFC 3339 UTC time of the ``playbook_on_stats`` event, None when the run
    produced no stats. ``error`` explains a run that did not complete normally (syntax error,
    timeout, cancellation, crash, missing interpreter): the text is meant for a ``Failure``
    condition. ``requeue_after`` comes from the first ``requeue_after`` task's ``period``;
    ``stats_data`` is what ``set_stats`` (``per_host: false``) accumulated.
    ``artifact_ident`` names the run's directory under ``artifact_dir``'s parent.
    """

    ok: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    unreachable: int = 0
    rescued: int = 0
    ignored: int = 0
    completion: str | None = None
    failed_tasks: tuple[FailedTask, ...] = ()
    error: str | None = None
    cancelled: bool = False
    requeue_after: timedelta | None = None
    stats_data: Mapping[str, Any] = field(default_factory=dict)
    duration: float = 0.0
    artifact_ident: str = ""
    artifact_dir: Path | None = None
    #: the plays that matched no host (``<name> (hosts: <pattern>)``); the run still counts as a success
    unmatched_plays: tuple[str, ...] = ()

    @property
    def succeeded(self) -> bool:
        """True when the playbook ran to its end with no failed or unreachable task."""
        return (
            self.error is None
            and not self.cancelled
            and self.completion is not None
            and self.failures == 0
            and self.unreachable == 0
            and not self.failed_tasks
        )

    @property
    def failure_message(self) -> str:
        """The ``Failure`` condition message: the failed tasks' messages joined by newlines, or the error."""
        if self.failed_tasks:
            return "\n".join(failed.msg for failed in self.failed_tasks)
        return self.error or ""


class Runner(Protocol):
    """Runs playbooks or roles for custom resources; see the module docstring for cancellation."""

    async def run(self, request: RunRequest, cancel: CancelSignal | None = None) -> RunResult:
        """Run the watch's playbook or role for ``request.cr`` and report the outcome."""
        ...

    async def close(self) -> None:
        """Cancel the runs in flight, wait for them, and release the runner's resources."""
        ...
