"""Warm Ansible modules: each Python module of a warm run executes in a fork of an interpreter that has
already imported the libraries modules need (the Kubernetes client above all).

Why this module exists: a warm run's ``ansible-playbook`` is a fork (:mod:`.warmworker`), but every
task still starts its module as ``<python> AnsiballZ_<module>.py``, a fresh interpreter. For a
``kubernetes.core`` module that is ~0.5 s of CPU importing ``kubernetes``, ``requests``, ``yaml`` and
the rest before it sends its first request -- most of the cost of a one-``k8s``-task reconcile. Here
the imports are paid once per environment.

Processes (started by :class:`~hybrid_operator.ansible.warmpool.WarmPool` beside the warm worker):

* the **launcher**: the file the pool writes (:func:`launcher_source`) and pins as a warm run's
  ``ansible_python_interpreter``. It starts with ``-I -S`` (a few milliseconds). Given one
  ``AnsiballZ_*.py`` file, it asks the broker to run it, handing over its standard streams, and exits
  with the module's status (or dies of the module's signal). Given anything else -- ``-c``, ``-m``, a
  script, a pipelined module on standard input -- or when the broker does not answer ``+``, it execs
  the real interpreter with the same arguments: exactly the cold path;
* the **broker** (``python -m hybrid_operator.ansible.modulehost broker <socket>``): stdlib only;
  accepts launchers on a Unix socket and routes each request to the zygote of its environment,
  starting one when none fits (at most :data:`MAX_ZYGOTES`, least recently used dropped);
* a **zygote** per environment (``... zygote <fd>``): a fresh interpreter started with the request's
  environment, which imports :data:`PRELOAD` and then only forks. Its environment is the module's,
  except :data:`PER_RUN_ENV` (the run's kubeconfig, the shell's ``PWD``): a child sets the module's
  exact environment before it runs, and re-reads the one import-time use of those
  (``kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION``). A zygote idle for
  :data:`ZYGOTE_IDLE_SECONDS` exits, and so does one whose broker is gone (the operator died), after
  killing the process groups of the modules it still runs;
* a **module child** per module (forked from the zygote): the launcher's standard streams, working
  directory, umask, environment and ``sys.argv``, ``sys.path[0]`` the script's directory, fresh signal
  dispositions; runs the file as ``__main__`` (:func:`runpy.run_path`) and ends as an interpreter
  does (non-daemon threads joined, ``atexit`` handlers, streams flushed). It is in a process group of
  its own: when the launcher dies (a cancelled run's process group is killed), the zygote kills that
  group, as the kill would have reached a cold module and its children.

The libraries are imported by name (:func:`importlib.import_module`) in the zygote, the one place
besides :mod:`hybrid_operator.kube.client` where the Kubernetes client is loaded, on the module's
side of the process boundary; nothing from ansible-core is preloaded (the module's own copy, in its
AnsiballZ payload, is what it imports).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import logging
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hybrid_operator import processes

logger = logging.getLogger(__name__)

#: the module's environment variables a zygote need not share (set in each module child)
PER_RUN_ENV = frozenset({"KUBECONFIG", "K8S_AUTH_KUBECONFIG", "AWX_ISOLATED_DATA_DIR", "PWD", "OLDPWD"})
#: what a zygote imports before it forks modules (missing ones are skipped)
PRELOAD = (
    "kubernetes", "kubernetes.dynamic", "kubernetes.dynamic.exceptions", "kubernetes.config",
    "kubernetes.stream", "kubernetes_validate", "yaml", "requests", "requests_oauthlib", "urllib3",
    "jsonpatch", "dateutil.parser", "json", "email.mime.multipart", "http.client",
)
MAX_ZYGOTES = 4
ZYGOTE_IDLE_SECONDS = 600.0
#: the largest request a launcher sends (its environment, mostly)
MAX_REQUEST = 256 * 1024
ACCEPTED = b"+"
_STATUS = b"x"
_ACCEPT_TIMEOUT = 10.0


def launcher_source(python: str, socket_path: str) -> str:
    """The launcher script pinned as the interpreter of a warm run's modules (see the module docstring)."""
    return f'''#!{python} -IS
"""hybrid-operator's warm module launcher (written by the operator; hybrid_operator/ansible/modulehost.py)."""
import os
import sys

PYTHON = {python!r}
SOCKET = {socket_path!r}


def cold():
    os.execv(PYTHON, [PYTHON, *sys.argv[1:]])


def warm(script):
    import json
    import socket
    umask = os.umask(0o022)
    os.umask(umask)
    request = json.dumps({{"script": os.path.abspath(script), "cwd": os.getcwd(), "env": dict(os.environ),
                          "umask": umask}}).encode()
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(SOCKET)
        socket.send_fds(conn, [request], [0, 1, 2])
        if conn.recv(16) != b"+":
            return None
    except OSError:
        return None
    try:
        status = conn.recv(16)
    except OSError:
        status = b""
    if not status.startswith(b"x"):
        sys.stderr.write("hybrid-operator: the warm module process was lost before it reported its status\\n")
        return 1
    code = int(status[1:])
    if code < 0:
        import signal
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


args = sys.argv[1:]
if len(args) == 1 and os.path.basename(args[0]).startswith("AnsiballZ_") and args[0].endswith(".py"):
    code = warm(args[0])
    if code is not None:
        sys.exit(code)
cold()
'''


def fingerprint(env: Mapping[str, str]) -> str:
    """Requests with the same fingerprint can share a zygote: the environment without :data:`PER_RUN_ENV`."""
    return json.dumps({key: value for key, value in sorted(env.items()) if key not in PER_RUN_ENV})


# -- the broker ------------------------------------------------------------------------------------------

class _ZygoteProcess:
    """A zygote the broker started, and the socket that carries it requests."""

    def __init__(self, python: str, env: Mapping[str, str], marker: Mapping[str, str]) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [python, "-m", "hybrid_operator.ansible.modulehost", "zygote", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                env={**env, **marker}, cwd="/",
            )  # no parent-death signal: when the broker dies, the zygote kills its modules' groups, then exits
        except OSError:
            mine.close()
            raise
        finally:
            theirs.close()
        self.socket = mine
        self.used = time.monotonic()

    def alive(self) -> bool:
        return self.process.poll() is None

    def forward(self, request: bytes, fds: list[int]) -> bool:
        try:
            socket.send_fds(self.socket, [request], fds)
        except OSError:
            return False
        self.used = time.monotonic()
        return True

    def close(self) -> None:
        self.socket.close()
        processes.wait_or_kill(self.process, 5.0)


class Broker:
    """Routes launchers' requests to zygotes, one per :func:`fingerprint`."""

    def __init__(self, listener: socket.socket, *, python: str = sys.executable,
                 marker: Mapping[str, str] | None = None) -> None:
        self._listener = listener
        self._python = python
        self._marker = dict(marker or {})
        self._zygotes: dict[str, _ZygoteProcess] = {}

    def serve(self) -> None:
        """Serve until the listening socket is closed or the process is killed."""
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                self.handle(conn)

    def handle(self, conn: socket.socket) -> None:
        """One launcher: read its request and standard streams, hand both to a zygote, or refuse."""
        conn.settimeout(_ACCEPT_TIMEOUT)
        fds: list[int] = []
        try:
            request, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 3)
            env = json.loads(request)["env"]
            if len(fds) != 3 or not isinstance(env, dict):
                return
            if not self._zygote_for(env).forward(request, [*fds, conn.fileno()]):
                return
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.warning("warm module request refused", extra={"error": str(error)})
        finally:
            for fd in fds:
                os.close(fd)

    def _zygote_for(self, env: Mapping[str, str]) -> _ZygoteProcess:
        key = fingerprint(env)
        zygote = self._zygotes.get(key)
        if zygote is not None and zygote.alive():
            return zygote
        if zygote is not None:
            self._zygotes.pop(key).close()
        for stale in [k for k, z in self._zygotes.items() if not z.alive()]:
            self._zygotes.pop(stale).close()
        while len(self._zygotes) >= MAX_ZYGOTES:
            oldest = min(self._zygotes, key=lambda k: self._zygotes[k].used)
            self._zygotes.pop(oldest).close()
        zygote = _ZygoteProcess(self._python, env, self._marker)
        self._zygotes[key] = zygote
        logger.info("warm module zygote started", extra={"pid": zygote.process.pid, "zygotes": len(self._zygotes)})
        return zygote

    def close(self) -> None:
        for zygote in self._zygotes.values():
            zygote.close()
        self._zygotes.clear()


# -- the zygote ------------------------------------------------------------------------------------------

def preload() -> None:
    """Import :data:`PRELOAD` (what is not installed is skipped), then keep it out of the collector's way."""
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    gc.collect()
    gc.freeze()


class Zygote:
    """Forks a module child per request and reports each child's status to its launcher."""

    def __init__(self, control: socket.socket) -> None:
        self._control = control
        #: module children: pid -> its launcher's socket (None once the launcher is gone)
        self._children: dict[int, socket.socket | None] = {}
        self._wake_read, wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(wake_write, False)
        self._wake_write = wake_write
        self._idle_since = time.monotonic()

    def serve(self) -> None:
        """Serve until the broker closes the control socket or the zygote was idle too long."""
        signal.set_wakeup_fd(self._wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        while True:
            readable = self._wait()
            if self._control in readable and not self._take_request():
                break
            for conn in [c for c in readable if c is not self._control]:
                self._launcher_gone(conn)
            self._reap()
            if not self._children and time.monotonic() - self._idle_since > ZYGOTE_IDLE_SECONDS:
                break
        for pid in list(self._children):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)

    def _wait(self) -> list[Any]:
        watched: list[Any] = [self._control, *(c for c in self._children.values() if c), self._wake_read]
        try:
            readable, _, _ = select.select(watched, [], [], ZYGOTE_IDLE_SECONDS / 4)
        except InterruptedError:
            return []
        if self._wake_read in readable:
            with contextlib.suppress(OSError):
                while os.read(self._wake_read, 512):
                    pass
        return [r for r in readable if r is not self._wake_read]

    def _take_request(self) -> bool:
        try:
            request, fds, _flags, _addr = socket.recv_fds(self._control, MAX_REQUEST, 4)
        except OSError:
            return False
        if not request:
            return False
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            return True
        conn = socket.socket(fileno=fds[3])
        streams = fds[:3]
        try:
            parsed = json.loads(request)
            conn.sendall(ACCEPTED)
        except (OSError, ValueError):
            conn.close()
            for fd in streams:
                os.close(fd)
            return True
        pid = self._fork(parsed, streams, conn)
        if pid is None:
            with contextlib.suppress(OSError):
                os.write(streams[2], b"hybrid-operator: cannot fork a warm module process\n")
                conn.sendall(_STATUS + b"1")
            conn.close()
        else:
            self._children[pid] = conn
        for fd in streams:
            os.close(fd)
        return True

    def _fork(self, request: dict[str, Any], streams: list[int], conn: socket.socket) -> int | None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        try:
            pid = os.fork()
        except OSError:
            return None
        if pid == 0:
            code = 1
            try:
                self._become_module(request, streams, conn)
                code = run_module(request["script"])
            finally:
                os._exit(code)
        return pid

    def _become_module(self, request: dict[str, Any], streams: list[int], conn: socket.socket) -> None:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        for target, fd in enumerate(streams):
            os.dup2(fd, target)
        keep = {0, 1, 2}
        for fd in (*streams, self._control.fileno(), conn.fileno(), self._wake_read, self._wake_write,
                   *(c.fileno() for c in self._children.values() if c)):
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        _reread_import_time_environment()
        script = str(request["script"])
        sys.argv = [script]
        if sys.path:
            sys.path[0] = os.path.dirname(script)
        for stream in (sys.stdout,):
            with contextlib.suppress(Exception):
                stream.reconfigure(line_buffering=stream.isatty())  # type: ignore[union-attr]

    def _launcher_gone(self, conn: socket.socket) -> None:
        """A launcher's socket became readable while its module runs: it died (killed with its run)."""
        for pid, owned in list(self._children.items()):
            if owned is conn:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                self._children[pid] = None
                conn.close()

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in self._children:
                continue
            conn = self._children.pop(pid)
            self._idle_since = time.monotonic()
            if conn is None:
                continue
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            with contextlib.suppress(OSError):
                conn.sendall(_STATUS + str(code).encode())
            conn.close()


def _reread_import_time_environment() -> None:
    """What a preloaded library read from a :data:`PER_RUN_ENV` variable at import, read again."""
    default = os.environ.get("KUBECONFIG", "~/.kube/config")
    for name in ("kubernetes.config.kube_config", "kubernetes.config"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "KUBE_CONFIG_DEFAULT_LOCATION"):
            setattr(module, "KUBE_CONFIG_DEFAULT_LOCATION", default)  # noqa: B010 -- another library's global


def run_module(script: str) -> int:
    """Run ``script`` as ``python script`` would, and end as the interpreter does; the exit status."""
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except BaseException:  # the interpreter prints any uncaught exception, then exits 1
        traceback.print_exc()
        code = 1
    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as at exit
    with contextlib.suppress(Exception):
        import atexit

        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{code}\n")
    return 1


# -- entry points ------------------------------------------------------------------------------------------

#: the longest interpreter path a launcher's ``#!`` line takes (the kernel reads 256 bytes of it)
MAX_SHEBANG_PATH = 200


def write_launcher(directory: Path, python: str) -> tuple[Path, Path]:
    """Write the launcher into ``directory``; its path and the broker's socket path. OSError when the
    interpreter's path cannot be a ``#!`` line (white space, or too long): modules then start cold."""
    if len(python) > MAX_SHEBANG_PATH or any(character.isspace() for character in python):
        raise OSError(f"the interpreter path {python!r} cannot start a script (white space, or over "
                      f"{MAX_SHEBANG_PATH} characters)")
    socket_path = directory / "modules.sock"
    launcher = directory / "python"
    launcher.write_text(launcher_source(python, str(socket_path)))
    launcher.chmod(0o755)
    return launcher, socket_path


def main(argv: list[str] | None = None) -> int:
    """``python -m hybrid_operator.ansible.modulehost broker <socket>`` or ``... zygote <fd>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "zygote":
        control = socket.socket(fileno=int(args[1]))
        preload()
        Zygote(control).serve()
        return 0
    if len(args) == 2 and args[0] == "broker":
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the pool stops the broker with SIGTERM
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args[1])
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(args[1])
        listener.listen(64)
        marker = {key: value for key, value in os.environ.items() if key == processes.MARKER_ENV}
        broker = Broker(listener, marker=marker)
        signal.signal(signal.SIGTERM, lambda *_: listener.close())
        try:
            broker.serve()
        finally:
            broker.close()
        return 0
    sys.stderr.write("usage: python -m hybrid_operator.ansible.modulehost broker <socket> | zygote <fd>\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
