"""The ansible-runner adapter: runs a watch's playbook or role for one CR, off the event loop.

This is the only module importing ``ansible_runner``. ansible-runner's ``run`` blocks, so each run
goes to a bounded thread pool; the traps it sets are avoided on purpose (``libraries.md`` §4):

* ``cancel_callback`` is always passed -- without it, a run started from the main thread replaces
  the process's SIGTERM/SIGINT handlers -- and it doubles as the cancellation check
  (:mod:`hybrid_operator.runners.base` documents the contract);
* every run gets a fresh private data directory, deleted afterwards, so the ``env/extravars`` of an
  earlier run can never leak into a later one (ansible-runner writes env files only when absent);
* artifacts go to the CR's own directory with a unique ident, and this module rotates them itself
  (:mod:`hybrid_operator.runners.artifacts`), never with ansible-runner's ``rotate_artifacts``.

What ``ansible-playbook`` gets, as the Operator SDK gives it: the extra vars of
:func:`hybrid_operator.ansible.extravars.build_extra_vars`, as the documents of
:func:`~hybrid_operator.ansible.extravars.extra_vars_documents` (one ``-e @file`` each); the inventory
``localhost ansible_connection=local ansible_python_interpreter=<this Python>``, or a copy of
``$ANSIBLE_INVENTORY`` (a directory or a file) when that is set; for a role, a
generated ``hosts: localhost`` play with ``gather_facts`` off when ``ANSIBLE_GATHERING=explicit``
and the role's parent directory first in ``ANSIBLE_ROLES_PATH``; ``KUBECONFIG`` and
``K8S_AUTH_KUBECONFIG`` set to the request's kubeconfig; the request's verbosity and extra
arguments. ``ansible-playbook`` runs in ``project_dir`` (where ``ansible.cfg`` is looked up).

Different on purpose (docs/security.md), as defence in depth behind the reconciler's refusal of
specs that set Ansible's own variables:

* the command line is ``ansible-playbook <--ansible-args> -e @<extra vars file>... -c local -e
  {"ansible_connection": "local", "ansible_python_interpreter": <this Python>} ...``: extra vars
  given with ``-e`` all have the same precedence and the LAST one wins, so the connection and the
  interpreter are pinned even if an ``ansible_*`` key reached the extra vars;
* the spec's top-level variables that Ansible itself reads (``ansible_*``, magic variables) are never
  written to the extra vars, and with ``markUnsafe`` the names of the spec's variables are unsafe too
  (:func:`~hybrid_operator.ansible.extravars.extra_vars_documents`), whatever was checked before;
* facts are cached in memory only (``ANSIBLE_CACHE_PLUGIN=memory``): ansible-runner's default
  ``jsonfile`` cache writes ``ansible_env`` -- the whole environment -- into the artifacts;
* the stdout callback is ours (:data:`CALLBACK_PLUGINS`): ansible-runner's, except that ``ansible_env``
  leaves every task result before it is shown or written to the job events;
* the ``command`` artifact is redacted as it is written (:mod:`hybrid_operator.ansible.commandfile`).

Two ways to run the same arguments (``--ansible-runner``, docs/ansible.md "Warm execution"):

* ``warm`` (default): :class:`~hybrid_operator.ansible.warmpool.WarmPool` hands them to a
  long-lived worker that calls ``ansible_runner.run`` in a fresh fork of an interpreter that has
  already imported ansible-core (:mod:`hybrid_operator.ansible.warmworker`). When the worker
  cannot be started or reached, the run falls back to the cold path;
* ``cold``: ``ansible_runner.run`` in this process, which execs ``ansible-playbook``.

Both use :class:`FastCloseSpawn` for ansible-runner's pexpect child: the child has already reached
end of file when ansible-runner closes it, so the 100 ms ``delayafterclose`` sleep is replaced by
waiting (bounded) for the process to exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import math
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import ansible_runner
import ansible_runner.runner
import pexpect

from hybrid_operator.ansible import artifacts
from hybrid_operator.ansible.commandfile import CommandFileGuard, write_private
from hybrid_operator.ansible.events import EventCollector, RunOutcome, result_from_events
from hybrid_operator.ansible.extravars import extra_vars_documents
from hybrid_operator.ansible.runs import CANCEL_POLL_SECONDS, CancelSignal, RunRequest, RunResult
from hybrid_operator.ansible.warmpool import WarmPool, WorkerUnavailable
from hybrid_operator.kube import objects

logger = logging.getLogger(__name__)

#: the extra vars files in a run's private data directory (not ansible-runner's ``env/extravars``), by order
EXTRA_VARS_FILE = "extravars-{}.json"
#: ansible-runner's ``awx_display`` stdout callback, which leaves the environment out of task results
#: (``callback_plugins/awx_display.py``); first on every run's ``ANSIBLE_CALLBACK_PLUGINS``
CALLBACK_PLUGINS = Path(__file__).resolve().parent / "callback_plugins"
#: the values of ``--ansible-runner``
RunnerMode = Literal["warm", "cold"]
RUNNER_MODES: tuple[RunnerMode, ...] = ("warm", "cold")
#: the longest FastCloseSpawn waits for a child that reached end of file to exit before pexpect's own close
EXIT_WAIT_SECONDS = 2.0


class FastCloseSpawn(pexpect.spawn):  # type: ignore[misc]
    """pexpect's spawn without the fixed 100 ms sleep in ``close``: it waits for the child's exit instead.

    ansible-runner closes the child after reading to end of file, when the process is exiting: polling
    for its exit (bounded by :data:`EXIT_WAIT_SECONDS`, then pexpect's own close, which terminates it)
    gives the same exit status without the dead time.
    """

    def close(self, force: bool = True) -> None:
        process = getattr(self, "ptyproc", None)
        if process is not None and not self.closed:
            deadline = time.monotonic() + EXIT_WAIT_SECONDS
            pause = 0.0005
            while process.isalive() and time.monotonic() < deadline:
                time.sleep(pause)
                pause = min(pause * 2, 0.02)
            process.delayafterclose = 0
        super().close(force=force)


class PexpectWithSpawn(types.ModuleType):
    """The ``pexpect`` module as ansible-runner's runner module sees it: ``spawn`` replaced, the rest pexpect's."""

    def __init__(self, spawn: Callable[..., Any]) -> None:
        super().__init__("pexpect")
        self.spawn = spawn

    def __getattr__(self, name: str) -> Any:
        return getattr(pexpect, name)


# ansible-runner looks up ``pexpect.spawn`` on its runner module's ``pexpect``: only its spawns change
ansible_runner.runner.pexpect = PexpectWithSpawn(FastCloseSpawn)


class AnsibleRunner:
    """Runs playbooks and roles through ansible-runner, at most ``max_workers`` at a time.

    ``timeout`` (seconds, None for none) stops a run that takes longer. Private data directories
    are created under ``work_dir`` (default: the system's temporary directory). ``project_dir`` is
    the working directory of ``ansible-playbook`` (default: the current directory at construction).
    """

    def __init__(
        self, *, max_workers: int = 2, timeout: float | None = None, work_dir: Path | None = None,
        project_dir: Path | None = None, mode: RunnerMode = "warm", worker_env: Mapping[str, str] | None = None,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive or None, got {timeout}")
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers, thread_name_prefix="ansible-run")
        self._timeout = timeout
        self._work_dir = work_dir
        self._project_dir = (project_dir or Path.cwd()).absolute()
        self._python = Path(sys.executable)
        self._in_flight: dict[asyncio.Future[RunResult], threading.Event] = {}
        self._closed = False
        if mode not in RUNNER_MODES:
            raise ValueError(f"mode must be one of {', '.join(RUNNER_MODES)}, got {mode!r}")
        self.mode: RunnerMode = mode
        self._warm = WarmPool(python=self._python, env=worker_env) if mode == "warm" else None

    @property
    def warm_pool(self) -> WarmPool | None:
        """The warm worker's pool (None in cold mode)."""
        return self._warm

    async def run(self, request: RunRequest, cancel: CancelSignal | None = None) -> RunResult:
        """Run the request's playbook or role; see :mod:`hybrid_operator.runners.base` for cancellation."""
        if self._closed:
            raise RuntimeError("the Ansible runner is closed")
        stop = threading.Event()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, self.run_blocking, request, _AnySet(stop, cancel))
        self._in_flight[future] = stop
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            stop.set()
            await asyncio.wait([future])
            raise
        finally:
            self._in_flight.pop(future, None)

    async def close(self) -> None:
        """Cancel the runs in flight, wait for their processes to end, and stop the thread pool."""
        self._closed = True
        for stop in self._in_flight.values():
            stop.set()
        if self._in_flight:
            await asyncio.wait(list(self._in_flight))
        self._executor.shutdown(wait=True)
        if self._warm is not None:
            await asyncio.to_thread(self._warm.close)

    def run_blocking(self, request: RunRequest, cancel: CancelSignal | None = None) -> RunResult:
        """The same run in the calling thread, which it blocks (``run`` calls it in a worker thread).

        Safe in the main thread too: the process's signal handlers are left alone.
        """
        def cancelled() -> bool:
            return cancel is not None and cancel.is_set()

        metadata = objects.meta(request.cr)
        directory = artifacts.artifacts_dir(
            request.artifacts_root, request.watch.gvk, str(metadata.get("namespace") or ""),
            str(metadata.get("name") or ""))
        if cancelled():
            return result_from_events([], RunOutcome("canceled"))
        ident = artifacts.new_ident()
        collector = EventCollector()
        started = time.monotonic()
        logger.debug("ansible run starting", extra={"ident": ident, "artifacts": str(directory)})
        try:
            outcome = self._invoke(request, directory, ident, collector, cancelled)
        finally:
            artifacts.rotate(directory, request.max_artifacts, current=ident)
        outcome = replace(outcome, duration=time.monotonic() - started, ident=ident,
                          artifact_dir=directory / ident, timeout=self._timeout)
        result = result_from_events(collector.events(), outcome)
        logger.debug("ansible run finished", extra={
            "ident": ident, "status": outcome.status, "rc": outcome.rc, "seconds": round(outcome.duration, 3),
        })
        return result

    def _invoke(
        self, request: RunRequest, directory: Path, ident: str, collector: EventCollector,
        cancelled: Callable[[], bool],
    ) -> RunOutcome:
        try:
            private = Path(tempfile.mkdtemp(prefix="hybrid-operator-run-", dir=self._work_dir))
        except OSError as error:
            return RunOutcome("error", detail=f"cannot create a private data directory: {error}")
        try:
            kwargs = self._run_arguments(request, private, directory, ident)
            with CommandFileGuard(directory / ident):
                return self._execute(kwargs, collector, cancelled)
        except Exception as error:
            return RunOutcome("error", detail=f"{type(error).__name__}: {error}")
        finally:
            shutil.rmtree(private, ignore_errors=True)

    def _execute(self, kwargs: dict[str, Any], collector: EventCollector, cancelled: Callable[[], bool]) -> RunOutcome:
        """ansible-runner with ``kwargs``: through the warm worker, else here (cold mode, or no worker)."""
        if self._warm is not None:
            try:
                warm = self._warm.run(kwargs, collector, cancelled)
            except WorkerUnavailable as error:
                logger.warning("warm Ansible worker unavailable; running cold", extra={"error": str(error)})
            else:
                return RunOutcome(warm.status, rc=warm.rc, detail=warm.detail or "")
        runner = ansible_runner.run(**kwargs, event_handler=collector, cancel_callback=cancelled)
        rc = runner.rc if isinstance(runner.rc, int) else None
        return RunOutcome(str(runner.status), rc=rc)

    def _run_arguments(
        self, request: RunRequest, private: Path, directory: Path, ident: str
    ) -> dict[str, Any]:
        env = self._environment(request)
        run_vars = extra_vars_documents(request.cr, request.watch, finalizer=request.finalizer,
                                        extra=request.extra_vars)
        if run_vars.dropped:
            objects_meta = objects.meta(request.cr)
            logger.warning("spec variables dropped at run time", extra={
                "kind": request.watch.gvk.kind, "namespace": str(objects_meta.get("namespace") or ""),
                "cr": str(objects_meta.get("name") or ""), "variables": list(run_vars.dropped)})
        extra_vars_args: list[str] = []
        for index, document in enumerate(run_vars.documents):
            extra_vars_file = private / EXTRA_VARS_FILE.format(index)
            write_private(extra_vars_file, json.dumps(document).encode())
            extra_vars_args += ["-e", f"@{extra_vars_file}"]
        kwargs: dict[str, Any] = {
            "private_data_dir": str(private),
            "artifact_dir": str(directory),
            "ident": ident,
            "rotate_artifacts": 0,
            "project_dir": str(self._project_dir),
            "inventory": _inventory(private, env, self.module_python),
            "cmdline": shlex.join([*request.ansible_args, *extra_vars_args, *self.pinned_arguments()]),
            "settings": {"pexpect_timeout": CANCEL_POLL_SECONDS},
            "fact_cache_type": "memory",
            "quiet": True,
        }
        target, roles_path = _target(request, env)
        kwargs["playbook"] = target
        if roles_path is not None:
            env["ANSIBLE_ROLES_PATH"] = roles_path
        kwargs["envvars"] = env
        if request.verbosity > 0:
            kwargs["verbosity"] = request.verbosity
        if self._timeout is not None:
            kwargs["timeout"] = math.ceil(self._timeout)
        return kwargs

    @property
    def module_python(self) -> Path:
        """The interpreter of the runs' modules: in warm mode the warm module launcher (which execs this
        Python for anything but a module file), else this Python."""
        launcher = self._warm.module_interpreter if self._warm is not None else None
        return launcher or self._python

    def pinned_arguments(self) -> list[str]:
        """The last ``ansible-playbook`` arguments: the local connection and the modules' interpreter
        (:attr:`module_python`), which no extra var given before them can override."""
        pinned = {"ansible_connection": "local", "ansible_python_interpreter": str(self.module_python)}
        return ["-c", "local", "-e", json.dumps(pinned)]

    def _environment(self, request: RunRequest) -> dict[str, str]:
        env: dict[str, str] = {"ANSIBLE_NOCOLOR": "1", **request.env, "ANSIBLE_CACHE_PLUGIN": "memory"}
        # our awx_display (ansible-runner's, without the environment in task results) is found first
        callbacks = env.get("ANSIBLE_CALLBACK_PLUGINS", os.environ.get("ANSIBLE_CALLBACK_PLUGINS", ""))
        env["ANSIBLE_CALLBACK_PLUGINS"] = os.pathsep.join(
            [str(CALLBACK_PLUGINS), *(part for part in callbacks.split(os.pathsep) if part)])
        bin_dir = self._python.parent
        path = env.get("PATH", os.environ.get("PATH", ""))
        if (bin_dir / "ansible-playbook").exists() and str(bin_dir) not in path.split(os.pathsep):
            env["PATH"] = os.pathsep.join(part for part in (str(bin_dir), path) if part)
        if request.kubeconfig is not None:
            env["KUBECONFIG"] = env["K8S_AUTH_KUBECONFIG"] = str(request.kubeconfig)
        return env


def _inventory(private: Path, env: Mapping[str, str], python: Path) -> str:
    """The run's inventory: a copy of ``$ANSIBLE_INVENTORY`` (a directory, or a file as ``hosts``) in the
    private data directory, as the SDK copies it into each run's input directory; else one line,
    ``localhost`` with the local connection and this Python. OSError when the inventory cannot be copied."""
    source = env.get("ANSIBLE_INVENTORY") or os.environ.get("ANSIBLE_INVENTORY") or ""
    if not source:
        return f"localhost ansible_connection=local ansible_python_interpreter={python}\n"
    origin = Path(os.path.expanduser(source))
    target = private / "inventory"
    if origin.is_dir():
        shutil.copytree(origin, target, symlinks=False)
        return str(target)
    if not origin.is_file():
        raise OSError(f"ANSIBLE_INVENTORY={source} is neither a file nor a directory")
    target.mkdir(exist_ok=True)
    shutil.copyfile(origin, target / "hosts")
    return str(target / "hosts")


class _AnySet:
    """A cancel signal set as soon as either of two is: the runner's own stop flag or the caller's."""

    def __init__(self, own: threading.Event, caller: CancelSignal | None) -> None:
        self._own = own
        self._caller = caller

    def is_set(self) -> bool:
        return self._own.is_set() or (self._caller is not None and self._caller.is_set())


def _target(request: RunRequest, env: Mapping[str, str]) -> tuple[str | list[dict[str, Any]], str | None]:
    """The ``playbook`` argument -- the finalizer's own when it has one, else the watch's -- and, for a
    role, the roles path the run must have.

    A role becomes the play ansible-runner would write for its ``role`` argument (``hosts: localhost``,
    ``gather_facts: false`` unless facts are gathered by default). It is given as that play, with the
    role's parent directory in front of ``ANSIBLE_ROLES_PATH``, rather than as ``role``: for ``role``,
    ansible-runner appends ``<private data dir>/roles`` to the roles path, a directory that never exists
    here but whose name changes with every run -- and a warm interpreter serves only runs whose
    environment is its own (:mod:`hybrid_operator.ansible.warmworker`), so every role run would start
    a new one.
    """
    watch = request.watch
    playbook, role = watch.playbook, watch.role
    finalizer = watch.finalizer
    if request.finalizer and finalizer is not None and (finalizer.playbook or finalizer.role):
        playbook, role = finalizer.playbook, finalizer.role
    if playbook is not None:
        return str(Path(playbook).absolute()), None
    if role is None:
        raise ValueError(f"the watch for {watch.gvk} has neither a playbook nor a role")
    role_path = Path(role).absolute()
    inherited = env.get("ANSIBLE_ROLES_PATH", os.environ.get("ANSIBLE_ROLES_PATH", ""))
    roles_path = os.pathsep.join(part for part in (str(role_path.parent), inherited) if part)
    gathering = env.get("ANSIBLE_GATHERING", os.environ.get("ANSIBLE_GATHERING", ""))
    play: dict[str, Any] = {"hosts": "localhost", "roles": [{"name": role_path.name}]}
    if gathering.strip().lower() == "explicit":
        play["gather_facts"] = False
    return [play], roles_path
