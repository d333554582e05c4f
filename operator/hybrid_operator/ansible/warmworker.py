"""The warm Ansible worker: a long-lived process that runs each playbook in a fork of a pre-imported interpreter.

Why this module exists: a cold run starts ``ansible-playbook`` as a fresh interpreter that spends
~150 ms importing ansible-core before it reads the first task (issue 16). This worker pays those
imports once; every run is still a fresh *process* (a fork), so nothing a run does -- variables,
facts, environment, loaded plugins, module state -- can be seen by the next one.

Processes (all started from ``python -m hybrid_operator.ansible.warmworker``):

* the **worker** (one per operator; :class:`hybrid_operator.ansible.warmpool.WarmPool` starts it
  in a session of its own, with a parent-death signal, and restarts it when it dies). It imports
  ansible-runner, never ansible-core, and reads run requests from its control socket;
* a **zygote** per *fingerprint* -- the run environment minus :data:`PER_RUN_ENV`, and the working
  directory. A zygote sets exactly that environment and directory, puts a pseudo-terminal on its
  standard streams (as pexpect gives ``ansible-playbook``), imports :data:`PRELOAD`, parses
  ansible.builtin's routing table once for all its runs (:func:`_remember_builtin_routing`), and then
  only forks. ansible-core reads its configuration (``ANSIBLE_*``, ``ansible.cfg``) at import time,
  which is why a zygote serves only runs whose environment is identical to its own;
* a **run child** per run (forked from the zygote, or from the worker when no zygote fits yet). It
  calls ``ansible_runner.run`` with the operator's keyword arguments -- the same code as the cold
  path, so the command, environment, working directory, artifacts and job events are the same --
  and streams the events back to the operator over the run's own socket;
* ansible-runner's pexpect child. Where the cold path execs ``ansible-playbook``, the run child's
  spawn hook (:func:`_spawn`) runs ``ansible.cli.playbook.main`` in the freshly forked pty child
  instead -- but only when :func:`_warm_refusal` finds nothing that could make that differ from
  the exec (another environment, directory, interpreter, locale, or a changed ``ansible.cfg``);
  otherwise it execs as usual, and the outcome says why.

Cancellation is the cold path's: ansible-runner's cancel callback (here: a message on the run
socket, or the operator closing it) makes it kill the pty child's process group.

None of these processes outlives the operator. The worker and each zygote get a parent-death
signal (:func:`hybrid_operator.processes.die_with_parent`); a run child does not (it must outlive a
zygote that is dropped while the run goes on), so it watches its run socket instead: when the
operator's end closes without a word -- the operator was killed -- it kills its playbook's process
group and exits, even while ansible-runner is blocked (say, opening the ``command`` pipe whose
reader died with the operator). The playbook's pty child dies with the run child.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import io
import json
import logging
import os
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from hybrid_operator import processes

logger = logging.getLogger(__name__)

#: variables that differ between runs and that ansible-core and ansible-runner only read while running
#: (the proxy kubeconfig, read by the kubernetes modules; the artifact dir, read by the awx_display callback)
PER_RUN_ENV = frozenset({"KUBECONFIG", "K8S_AUTH_KUBECONFIG", "AWX_ISOLATED_DATA_DIR"})
#: variables the interpreter reads when it starts: a run whose values differ is never run warm
INTERPRETER_ENV_PREFIXES = ("PYTHON", "LC_", "LANG")
#: what a zygote imports before it forks runs
#: ``parent``: where ansible-core made this zygote's local temporary directory (each run makes its own there)
_LOCAL_TMP: dict[str, str] = {}

PRELOAD = (
    "ansible.cli.playbook", "ansible.executor.playbook_executor", "ansible.executor.task_queue_manager",
    "ansible.executor.task_executor", "ansible.executor.process.worker", "ansible.executor.module_common",
    "ansible.playbook.play", "ansible.playbook.role", "ansible.playbook.task", "ansible.inventory.manager",
    "ansible.vars.manager", "ansible.template", "ansible.plugins.loader", "ansible.plugins.strategy",
    "ansible.plugins.callback", "ansible.plugins.action", "ansible.plugins.connection",
    "ansible.plugins.inventory", "ansible.plugins.cache", "ansible.config.manager",
    # imported on the way by every run (what a one-task run added to ``sys.modules``), by ordinary
    # imports -- never plugins, which ansible-core loads by path, first found first served
    "ansible.playbook.handler_task_include", "ansible.playbook.included_file", "ansible.playbook.role_include",
    "ansible.utils.hashing", "ansible.utils.shlex", "ansible.utils._junit_xml", "multiprocessing.popen_fork",
    "pexpect", "pty", "resource", "tomllib", "xml.dom.minidom", "xml.etree.ElementTree",
)
#: ansible.builtin's routing table, which ansible-core parses in every process that resolves a plugin
BUILTIN_ROUTING = ("config", "ansible_builtin_runtime.yml")
#: the entry point ``ansible-playbook`` must have for the in-process run to be the same program
PLAYBOOK_ENTRY = "from ansible.cli.playbook import main"
#: zygotes kept at once (one per distinct run environment; the oldest is dropped)
MAX_ZYGOTES = 8
_MAX_MESSAGE = 1 << 20


def fingerprint(env: Mapping[str, str], cwd: str) -> dict[str, Any]:
    """What a zygote must share with a run: its environment without :data:`PER_RUN_ENV`, and its directory."""
    return {"env": {key: value for key, value in sorted(env.items()) if key not in PER_RUN_ENV}, "cwd": cwd}


# -- the pty child: ansible-playbook without exec -------------------------------------------------------

class _Zygote:
    """What the process forked from a zygote knows about it (set once, in the zygote)."""

    fingerprint: dict[str, Any] | None = None
    config_file: tuple[str | None, tuple[int, ...] | None] = (None, None)
    refusal: str | None = "no pre-imported interpreter"


def _config_identity() -> tuple[str | None, tuple[int, ...] | None]:
    """The ``ansible.cfg`` ansible-core would read now (from this process's environment and directory)."""
    from ansible.config.manager import find_ini_config_file

    path = find_ini_config_file()
    if not path:
        return None, None
    try:
        status = os.stat(path)
    except OSError:
        return str(path), None
    return str(path), (status.st_ino, status.st_size, status.st_mtime_ns)


def _warm_refusal(command: str, env: Mapping[str, str], cwd: str) -> str | None:
    """Why this run cannot be run in-process in this fork of a zygote; None when it can."""
    if _Zygote.refusal is not None or _Zygote.fingerprint is None:
        return _Zygote.refusal or "no pre-imported interpreter"
    if fingerprint(env, cwd) != _Zygote.fingerprint:
        return "the run environment or directory differs from the pre-imported interpreter's"
    try:
        with open(command, "rb") as handle:
            head = handle.read(4096)
    except OSError as error:
        return f"cannot read {command}: {error}"
    first, _, rest = head.partition(b"\n")
    interpreter = first[2:].strip().decode(errors="replace") if first.startswith(b"#!") else ""
    if not interpreter or not _same_file(interpreter, sys.executable):
        return f"{command} does not run with {sys.executable}"
    if PLAYBOOK_ENTRY.encode() not in rest:
        return f"{command} is not ansible-core's ansible-playbook"
    return None


def _same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def _become_playbook(argv: list[str], env: Mapping[str, str], parent: int) -> None:
    """In the pty child, in place of exec: be ``ansible-playbook argv[1:]`` and exit with its status.

    Returns (and the child then execs as usual) only when ``ansible.cfg`` changed since the zygote read it.
    Either way the child dies with ``parent``, the run child that forked it.
    """
    processes.die_with_parent(parent)
    if _config_identity() != _Zygote.config_file:
        return
    os.closerange(3, _max_fd())  # ptyprocess's exec-error pipe among them: its parent goes on at once
    os.environ.clear()
    os.environ.update(env)
    for number, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL),
                            (signal.SIGCHLD, signal.SIG_DFL), (signal.SIGPIPE, signal.SIG_IGN)):
        signal.signal(number, handler)
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(argv[0])
    _fresh_standard_streams()
    atexit._clear()  # the zygote's handlers are not this run's
    status = _run_playbook_main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def _run_playbook_main() -> int:
    from ansible import constants
    from ansible.cli.playbook import main

    # the zygote's local temporary directory is not this run's: ansible-core makes one per process, in
    # the directory its configuration names (rendered at import: the default is a template on ANSIBLE_HOME)
    run_tmp = tempfile.mkdtemp(prefix=f"ansible-local-{os.getpid()}", dir=_LOCAL_TMP.get("parent"))
    atexit.register(shutil.rmtree, run_tmp, True)
    constants.DEFAULT_LOCAL_TMP = run_tmp
    try:
        result = main()
    except SystemExit as done:
        code = done.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return result if isinstance(result, int) else 0


def _fresh_standard_streams() -> None:
    """Standard streams as a new interpreter makes them for a terminal (line-buffered)."""
    encoding, errors = sys.stdout.encoding, sys.stdout.errors
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=encoding,
                                 errors=errors)
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding=encoding,
                                  errors=errors, line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding=encoding,
                                  errors="backslashreplace", line_buffering=True)
    for name in ("__stdin__", "__stdout__", "__stderr__"):
        setattr(sys, name, getattr(sys, name.strip("_")))


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (ValueError, OSError):
        return 4096


# -- the run child: ansible_runner.run with the operator's arguments ------------------------------------

class _RunChannel:
    """The run child's end of the run socket: events and the outcome out, a cancel request in."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._cancelled = False
        #: the pty child's pid (and process group) once ansible-runner started it
        self.playbook: int | None = None

    def send(self, message: Mapping[str, Any]) -> None:
        try:
            self._sock.sendall(json.dumps(message, default=str).encode() + b"\n")
        except OSError:  # the operator is gone or gave up on the run
            self._cancelled = True

    def event(self, data: Mapping[str, Any]) -> bool:
        from hybrid_operator.ansible.events import strip_environment  # loaded already: the run imported runner

        strip_environment(data)  # before ansible-runner writes the event file, and before it is sent
        self.send({"event": data})
        return True

    def cancelled(self) -> bool:
        if not self._cancelled:
            readable, _, _ = select.select([self._sock], [], [], 0)
            if readable:
                self._cancelled = True  # "cancel", or end of file: the operator stopped waiting
        return self._cancelled

    def exit_when_the_operator_is_gone(self) -> None:
        """(a thread of its own) When the operator's end of the socket closes, stop the playbook and this process.

        Only a hang-up counts: a ``cancel`` message is data, and ansible-runner's cancel callback handles it.
        """
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLRDHUP)
        while not any(mask & (select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL)
                      for _, mask in poller.poll()):
            pass
        if self.playbook is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.playbook, signal.SIGKILL)
        os._exit(0)


def _spawn_hook(channel: _RunChannel) -> Callable[..., Any]:
    """A replacement for ``pexpect.spawn`` in ansible-runner: in-process when that is the same, and no close delay."""
    import pexpect
    from pexpect.utils import which

    from hybrid_operator.ansible.runner import FastCloseSpawn

    def spawn(command: str, args: list[str], *, cwd: str, env: dict[str, str], **kwargs: Any) -> pexpect.spawn:
        path = which(command, env=env) or command
        refusal = _warm_refusal(path, env, cwd)
        parent = os.getpid()
        if refusal is None:
            argv = [path, *args]
            kwargs["preexec_fn"] = lambda: _become_playbook(argv, env, parent)
        else:
            kwargs["preexec_fn"] = lambda: processes.die_with_parent(parent)
        child = FastCloseSpawn(command, args, cwd=cwd, env=env, **kwargs)
        channel.playbook = child.pid
        channel.send({"started": {"pid": child.pid, "warm": refusal is None, "refusal": refusal,
                                  "fingerprint": fingerprint(env, cwd)}})
        return child

    return spawn


def _run_child(sock: socket.socket) -> None:
    """The body of a run child: read the request, run it through ansible-runner, report, exit."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    channel = _RunChannel(sock)
    threading.Thread(target=channel.exit_when_the_operator_is_gone, name="operator-watch", daemon=True).start()
    channel.send({"child": os.getpid()})
    try:
        request = json.loads(_read_line(sock))
        os.environ.clear()
        os.environ.update(request["environ"])
        import ansible_runner
        from ansible_runner import runner as runner_module

        from hybrid_operator.ansible.runner import PexpectWithSpawn

        runner_module.pexpect = PexpectWithSpawn(_spawn_hook(channel))
        result = ansible_runner.run(**request["kwargs"], event_handler=channel.event,
                                    cancel_callback=channel.cancelled)
        rc = result.rc if isinstance(result.rc, int) else None
        channel.send({"outcome": {"status": str(result.status), "rc": rc}})
    except Exception as error:  # reported to the operator as the cold path reports it
        channel.send({"outcome": {"status": "error", "detail": f"{type(error).__name__}: {error}"}})
    os._exit(0)


def _read_line(sock: socket.socket) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("the operator closed the run socket before sending the request")
        data += chunk
        if len(data) > 64 * _MAX_MESSAGE:
            raise ValueError("run request too large")
    return bytes(data)


def _fork_run(run_fd: int, keep: list[socket.socket]) -> None:
    """Fork a run child for the run socket ``run_fd`` (closed here afterwards)."""
    pid = os.fork()
    if pid == 0:
        try:
            for other in keep:
                other.close()
            _run_child(socket.socket(fileno=run_fd))
        finally:
            os._exit(70)
    os.close(run_fd)


# -- zygotes ------------------------------------------------------------------------------------------

def _zygote_main(control: socket.socket, print_: dict[str, Any], worker_env: Mapping[str, str], worker: int) -> None:
    """A zygote: set the environment and directory, preload ansible-core, then fork a run child per request."""
    processes.die_with_parent(worker)
    refusal = _interpreter_refusal(print_["env"], worker_env)
    os.environ.clear()
    os.environ.update(print_["env"])
    try:
        os.chdir(print_["cwd"])
        master = _pty_standard_streams()
        try:
            if refusal is None:
                _preload()
                _Zygote.config_file = _config_identity()
        finally:
            _null_standard_streams(master)
    except Exception as error:
        refusal = f"preloading ansible-core failed: {type(error).__name__}: {error}"
    _Zygote.fingerprint, _Zygote.refusal = print_, refusal
    while True:
        message, fds, _, _ = socket.recv_fds(control, 4096, 1)
        if not message or not fds:
            os._exit(0)
        if refusal is None and _config_identity() != _Zygote.config_file:
            os.close(fds[0])
            control.send(b"stale")
            os._exit(0)
        _fork_run(fds[0], [control])
        control.send(b"ok")


def _interpreter_refusal(env: Mapping[str, str], worker_env: Mapping[str, str]) -> str | None:
    """Variables a new interpreter reads at start-up that differ between the run and this worker."""
    def relevant(source: Mapping[str, str]) -> dict[str, str]:
        return {key: value for key, value in source.items() if key.startswith(INTERPRETER_ENV_PREFIXES)}

    if relevant(env) != relevant(worker_env):
        return "the run sets interpreter variables (PYTHON*, LANG, LC_*) other than the worker's"
    return None


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    _remember_builtin_routing()
    from ansible import constants

    _LOCAL_TMP["parent"] = os.path.dirname(constants.DEFAULT_LOCAL_TMP)
    with contextlib.suppress(OSError):  # made at import for this process; every run makes its own
        os.rmdir(constants.DEFAULT_LOCAL_TMP)


def _remember_builtin_routing() -> None:
    """Parse ansible.builtin's routing table once, here, instead of in every run (~250 ms of each).

    ansible-core turns a collection's ``runtime.yml`` into a dict with the replaceable
    ``_meta_yml_to_dict(data, content_id)`` (its ``content_id`` exists so that another
    implementation can cache the output), and parses ansible.builtin's -- 376 kB of YAML -- in every
    process. The replacement answers a request for exactly the bytes parsed here with a fresh copy of
    that result; any other content (another collection, or a file changed since) is parsed as before.
    """
    import marshal
    import os.path

    import ansible
    from ansible.utils.collection_loader import _collection_finder

    parse = _collection_finder._meta_yml_to_dict
    if parse is None or ansible.__file__ is None:
        return
    with open(os.path.join(os.path.dirname(ansible.__file__), *BUILTIN_ROUTING), "rb") as handle:
        known = handle.read()
    content_id = ("ansible.builtin", "runtime.yml")
    try:
        parsed = marshal.dumps(parse(known, content_id))
    except ValueError:  # a value marshal cannot copy: leave ansible-core's parser alone
        return

    def routing(data: bytes | str, identity: object) -> Any:
        if identity == content_id and data == known:
            return marshal.loads(parsed)
        return parse(data, identity)

    _collection_finder._meta_yml_to_dict = routing


def _pty_standard_streams() -> int:
    """A 24x80 pseudo-terminal on fds 0-2, as ansible-playbook has under pexpect, while ansible-core is imported."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    for number in (0, 1, 2):
        os.dup2(slave, number)
    os.close(slave)
    return master


def _null_standard_streams(master: int) -> None:
    """After the imports: the pty goes, fds 0-2 read and write /dev/null (nobody reads a zygote's output)."""
    null = os.open(os.devnull, os.O_RDWR)
    for number in (0, 1, 2):
        os.dup2(null, number)
    os.close(null)
    os.close(master)


class _ZygoteHandle:
    """The worker's side of one zygote."""

    def __init__(self, print_: dict[str, Any], worker_env: Mapping[str, str], keep: list[socket.socket]) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        worker = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                mine.close()
                for other in keep:
                    other.close()
                _zygote_main(theirs, print_, worker_env, worker)
            finally:
                os._exit(70)
        theirs.close()
        self.pid = pid
        self.sock = mine

    def fork(self, run_fd: int) -> bool:
        """Ask the zygote for a run child; False when it is gone or stale (the caller forks one itself)."""
        try:
            socket.send_fds(self.sock, [b"run"], [run_fd])
            return self.sock.recv(16) == b"ok"
        except OSError:
            return False

    def close(self) -> None:
        self.sock.close()


# -- the worker ---------------------------------------------------------------------------------------

class Worker:
    """The worker's loop: a request on the control socket is a JSON header and the run socket's fd."""

    def __init__(self, control: socket.socket) -> None:
        self._control = control
        self._zygotes: dict[str, _ZygoteHandle] = {}
        self._env = dict(os.environ)

    def serve(self) -> None:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self._control, _MAX_MESSAGE, 1)
            except InterruptedError:
                continue
            if not message:
                return
            if not fds:
                continue
            header = json.loads(message)
            self._dispatch(header.get("zygote"), fds[0])

    def _dispatch(self, print_: dict[str, Any] | None, run_fd: int) -> None:
        if print_ is not None:
            key = json.dumps(print_, sort_keys=True)
            zygote = self._zygotes.pop(key, None)
            if zygote is None:
                zygote = _ZygoteHandle(print_, self._env, [self._control, *self._sockets()])
            if zygote.fork(run_fd):
                self._zygotes[key] = zygote
                self._trim()
                os.close(run_fd)
                return
            zygote.close()
            logger.info("warm zygote replaced", extra={"pid": zygote.pid})
        _fork_run(run_fd, [self._control, *self._sockets()])

    def _sockets(self) -> list[socket.socket]:
        return [zygote.sock for zygote in self._zygotes.values()]

    def _trim(self) -> None:
        while len(self._zygotes) > MAX_ZYGOTES:
            oldest = next(iter(self._zygotes))
            self._zygotes.pop(oldest).close()


def main(argv: list[str] | None = None) -> int:
    """``python -m hybrid_operator.ansible.warmworker <control fd>``: serve until the operator closes the socket."""
    args = sys.argv[1:] if argv is None else argv
    control = socket.socket(fileno=int(args[0]))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # zygotes and run children are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the operator stops the worker by closing the socket
    started = time.monotonic()
    import ansible_runner  # noqa: F401 -- imported once here, inherited by every run child
    import pexpect  # noqa: F401

    logger.debug("warm worker ready", extra={"seconds": round(time.monotonic() - started, 3)})
    Worker(control).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
