"""The operator's side of the warm Ansible worker (:mod:`hybrid_operator.ansible.warmworker`).

Why this module exists: the adapter (:mod:`hybrid_operator.ansible.runner`) hands each run's
ansible-runner arguments to a long-lived worker process instead of calling ansible-runner itself,
and gets the job events back as they happen. This module starts that worker (in a session of its
own, killed by the kernel when the operator dies, carrying the operator's process marker so a
leftover is swept at the next start), restarts it when it has died, routes each run to the
pre-imported interpreter that matches its environment, and turns the worker's messages into the
same :class:`~hybrid_operator.ansible.events.RunOutcome` the cold path produces.

Each run has its own Unix socket pair: the run child reads the request from it and writes one JSON
line per message (``child``, ``started``, ``event``, ``outcome``); the operator writes ``cancel``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybrid_operator import processes
from hybrid_operator.ansible import modulehost
from hybrid_operator.ansible.runs import CANCEL_POLL_SECONDS
from hybrid_operator.ansible.warmworker import PER_RUN_ENV

logger = logging.getLogger(__name__)

#: how long a cancelled run child may take to stop its playbook before the operator kills both
CANCEL_GRACE_SECONDS = 10.0
#: routes remembered (run environment -> the zygote fingerprint it had last time)
MAX_ROUTES = 256
_STOP_SECONDS = 5.0
#: ``<tmp>/hybrid-modules-<operator pid>-<random>``: a warm pool's launcher and broker socket
MODULE_DIR_PREFIX = "hybrid-modules-"


@dataclass(frozen=True)
class WarmOutcome:
    """What the run child reported: ansible-runner's status and rc, or an error; and whether it ran warm."""

    status: str
    rc: int | None = None
    detail: str | None = None
    warm: bool = False
    refusal: str | None = None


def sweep_module_dirs(parent: Path) -> list[Path]:
    """Remove the warm module directories (launcher and socket) of operators that are gone: a killed
    operator cannot remove its own. Only this user's, and only where the pid in the name is not running."""
    return processes.sweep_dead_dirs(parent, MODULE_DIR_PREFIX)


class WorkerUnavailable(RuntimeError):
    """The worker could not be started or reached; the caller runs the request cold."""


class WarmPool:
    """Starts and talks to one warm worker; thread-safe (runs come from the runner's thread pool).

    ``env`` is added to the worker's environment (the operator's process marker).
    """

    def __init__(self, *, python: Path | None = None, env: Mapping[str, str] | None = None) -> None:
        self._python = python or Path(sys.executable)
        self._env = dict(env or {})
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._routes: dict[str, dict[str, Any]] = {}
        #: workers started, runs that ran in-process in a pre-imported interpreter, runs that exec'd
        self.started = 0
        self.warm_runs = 0
        self.exec_runs = 0
        #: why the last run that exec'd did not run in-process
        self.last_refusal: str | None = None
        self._broker: subprocess.Popen[bytes] | None = None
        self._module_dir: Path | None = None
        #: the launcher pinned as a warm run's module interpreter (modulehost.py); None: this Python
        self.module_interpreter: Path | None = None
        self._module_socket: Path | None = None
        try:
            sweep_module_dirs(Path(tempfile.gettempdir()))
            self._module_dir = Path(tempfile.mkdtemp(prefix=f"{MODULE_DIR_PREFIX}{os.getpid()}-"))
            launcher = modulehost.write_launcher(self._module_dir, str(self._python))
            self.module_interpreter, self._module_socket = launcher
        except OSError as error:
            logger.warning("warm Ansible modules unavailable; modules start cold", extra={"error": str(error)})

    # -- the worker process ---------------------------------------------------------------------

    def _ensure_worker(self) -> socket.socket:
        """The control socket of a live worker, starting one if there is none (call with the lock held)."""
        self._ensure_broker()
        if self._process is not None and self._process.poll() is None and self._control is not None:
            return self._control
        if self._process is not None:
            logger.warning("warm Ansible worker died; restarting it", extra={"rc": self._process.returncode})
            self._stop_locked()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = subprocess.Popen(
                [str(self._python), "-m", "hybrid_operator.ansible.warmworker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, env={**os.environ, **self._env},
                preexec_fn=processes.parent_death_signal(),  # noqa: PLW1509 -- async-signal-safe prctl only
            )
        except OSError as error:
            mine.close()
            raise WorkerUnavailable(f"cannot start the warm Ansible worker: {error}") from error
        finally:
            theirs.close()
        self._control = mine
        self.started += 1
        logger.info("warm Ansible worker started", extra={"pid": self._process.pid})
        return mine

    def _ensure_broker(self) -> None:
        """Start the warm module broker if it is not running (call with the lock held). A launcher that
        cannot reach it runs its module cold, so a failure here costs speed only."""
        if self._module_socket is None or (self._broker is not None and self._broker.poll() is None):
            return
        try:
            self._broker = subprocess.Popen(
                [str(self._python), "-m", "hybrid_operator.ansible.modulehost", "broker", str(self._module_socket)],
                start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                env={**os.environ, **self._env},
                preexec_fn=processes.parent_death_signal(),  # noqa: PLW1509 -- async-signal-safe prctl only
            )
        except OSError as error:
            logger.warning("warm module broker not started; modules start cold", extra={"error": str(error)})

    def _stop_broker(self) -> None:
        broker, self._broker = self._broker, None
        if broker is None:
            return
        broker.terminate()
        processes.wait_or_kill(broker, _STOP_SECONDS)

    def _stop_locked(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        process, self._process = self._process, None
        if process is None:
            return
        processes.wait_or_kill(process, _STOP_SECONDS)

    def close(self) -> None:
        """Stop the worker (its zygotes die with it; runs in flight were cancelled by the caller)."""
        with self._lock:
            self._stop_locked()
            self._stop_broker()
            if self._module_dir is not None:
                shutil.rmtree(self._module_dir, ignore_errors=True)
                self._module_dir = self.module_interpreter = None

    @property
    def worker_pid(self) -> int | None:
        """The worker's pid while it runs (tests kill it to check that it is restarted)."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    # -- one run ----------------------------------------------------------------------------------

    def run(self, kwargs: Mapping[str, Any], on_event: Callable[[Mapping[str, Any]], object],
            cancelled: Callable[[], bool]) -> WarmOutcome:
        """Run ansible-runner with ``kwargs`` in a run child; blocks; WorkerUnavailable when it cannot start."""
        route = _route_key(kwargs)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with mine:
            try:
                self._submit(theirs, self._routes.get(route))
            finally:
                theirs.close()
            try:
                mine.sendall(json.dumps({"kwargs": dict(kwargs), "environ": dict(os.environ)}).encode() + b"\n")
            except OSError as error:
                raise WorkerUnavailable(f"the warm Ansible worker did not take the run: {error}") from error
            outcome = _Conversation(mine, on_event, cancelled, self._remember(route)).follow()
        if outcome.warm:
            self.warm_runs += 1
        else:
            self.exec_runs += 1
            self.last_refusal = outcome.refusal
        return outcome

    def _submit(self, run_end: socket.socket, print_: dict[str, Any] | None) -> None:
        header = json.dumps({"zygote": print_}).encode()
        with self._lock:
            for attempt in (1, 2):
                control = self._ensure_worker()
                try:
                    socket.send_fds(control, [header], [run_end.fileno()])
                    return
                except OSError as error:
                    logger.warning("warm Ansible worker unreachable", extra={"attempt": attempt, "error": str(error)})
                    self._stop_locked()
        raise WorkerUnavailable("the warm Ansible worker cannot be reached")

    def _remember(self, route: str) -> Callable[[dict[str, Any]], None]:
        def remember(print_: dict[str, Any]) -> None:
            if self._routes.get(route) != print_:
                while len(self._routes) >= MAX_ROUTES:
                    self._routes.pop(next(iter(self._routes)))
                self._routes[route] = print_
        return remember


def _route_key(kwargs: Mapping[str, Any]) -> str:
    """Runs with the same key had the same run environment (but for :data:`PER_RUN_ENV`) last time."""
    envvars = {key: value for key, value in dict(kwargs.get("envvars") or {}).items() if key not in PER_RUN_ENV}
    parts = [envvars, kwargs.get("roles_path"), kwargs.get("project_dir"), kwargs.get("fact_cache_type"),
             sorted(os.environ.items())]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class _Conversation:
    """Reads one run child's messages until its outcome; sends ``cancel`` once when asked to."""

    def __init__(self, sock: socket.socket, on_event: Callable[[Mapping[str, Any]], object],
                 cancelled: Callable[[], bool], remember: Callable[[dict[str, Any]], None]) -> None:
        self._sock = sock
        self._on_event = on_event
        self._cancelled = cancelled
        self._remember = remember
        self._buffer = bytearray()
        self._child: int | None = None
        self._playbook: int | None = None
        self._cancel_sent: float | None = None
        self._started: dict[str, Any] = {}

    def follow(self) -> WarmOutcome:
        while True:
            self._check_cancel()
            readable, _, _ = select.select([self._sock], [], [], CANCEL_POLL_SECONDS)
            if not readable:
                continue
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                return WarmOutcome("error", detail="the warm Ansible worker's run process ended without an outcome",
                                   warm=bool(self._started.get("warm")))
            self._buffer += chunk
            outcome = self._drain()
            if outcome is not None:
                return outcome

    def _drain(self) -> WarmOutcome | None:
        while b"\n" in self._buffer:
            line, _, rest = self._buffer.partition(b"\n")
            self._buffer = bytearray(rest)
            message = json.loads(line)
            if "event" in message:
                self._on_event(message["event"])
            elif "started" in message:
                self._on_started(message["started"])
            elif "child" in message:
                self._child = int(message["child"])
            elif "outcome" in message:
                found = message["outcome"]
                return WarmOutcome(str(found.get("status")), rc=found.get("rc"), detail=found.get("detail"),
                                   warm=bool(self._started.get("warm")), refusal=self._started.get("refusal"))
        return None

    def _on_started(self, started: dict[str, Any]) -> None:
        self._started = started
        self._playbook = int(started["pid"])
        self._remember(started["fingerprint"])
        if not started.get("warm"):
            logger.debug("ansible run not warm", extra={"reason": started.get("refusal")})

    def _check_cancel(self) -> None:
        if self._cancel_sent is None:
            if self._cancelled():
                self._cancel_sent = time.monotonic()
                with contextlib.suppress(OSError):
                    self._sock.sendall(b"cancel\n")
        elif time.monotonic() - self._cancel_sent > CANCEL_GRACE_SECONDS:
            self._kill()

    def _kill(self) -> None:
        """The run child did not stop its playbook in time: kill the playbook's process group and the child."""
        if self._playbook is not None:
            with contextlib.suppress(OSError):
                os.killpg(self._playbook, signal.SIGKILL)
        if self._child is not None:
            with contextlib.suppress(OSError):
                os.kill(self._child, signal.SIGKILL)
        self._cancel_sent = time.monotonic()
