"""ansible-runner's ``<run>/command`` artifact, redacted before it reaches the disk.

ansible-runner 2.4 writes ``{"command", "cwd", "env"}`` to ``<artifact_dir>/<ident>/command`` just
before it starts ``ansible-playbook`` (``Runner.run``), and ``env`` is the WHOLE environment of the
run: every credential the operator received as an environment variable. Scrubbing the file after
the run leaves it readable on disk while the run lasts, and for good when the operator is killed
mid-run. So :class:`CommandFileGuard` puts a named pipe (FIFO, mode 0600) where that file will be
written: ansible-runner's ``open(..., "w")`` writes into the pipe, a thread of ours reads it,
redacts ``env`` (:func:`scrub_env`) and only then writes the real file (created 0600), replacing the
pipe. Unredacted text never touches the disk; after a ``kill -9`` at most an empty pipe remains.

If ansible-runner ever wrote the file another way (say, a temporary file renamed into place), the
guard finds a regular file at the end of the run and scrubs it then (:func:`scrub_command_file`),
and the security tests, which read the file while the run is going, fail.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from hybrid_operator.controller import conditions

log = logging.getLogger(__name__)

COMMAND_FILE = "command"
#: variables of the run environment whose values are kept in the ``command`` artifact (set by the
#: operator or ansible-runner, never secret); every other value is replaced by
#: :data:`~hybrid_operator.controller.conditions.REDACTED`. Keys always stay, so the artifact still
#: says which variables were set.
KEPT_ENV = frozenset({"PATH", "HOME", "LANG", "KUBECONFIG", "K8S_AUTH_KUBECONFIG", "ANSIBLE_COLLECTIONS_PATH",
                      "ANSIBLE_ROLES_PATH", "ANSIBLE_NOCOLOR", "ANSIBLE_GATHERING", "ANSIBLE_LOCAL_TEMP",
                      "ANSIBLE_CACHE_PLUGIN", "ANSIBLE_CALLBACK_PLUGINS", "HYBRID_OPERATOR_METRICS_URL", "PYTHONPATH",
                      "VIRTUAL_ENV"})
#: the most the pipe reader accepts (the environment of a process is far smaller)
MAX_COMMAND_BYTES = 16 * 1024 * 1024
_UNBLOCK_SECONDS = 2.0


def scrub_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """``env`` with every value not in :data:`KEPT_ENV` redacted."""
    return {key: (value if key in KEPT_ENV else conditions.REDACTED) for key, value in env.items()}


def scrubbed_document(data: bytes) -> bytes | None:
    """The ``command`` JSON with its ``env`` redacted, or None when ``data`` is not such a document."""
    try:
        document = json.loads(data)
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("env"), dict):
        return None
    document["env"] = scrub_env(document["env"])
    return json.dumps(document, ensure_ascii=False).encode()


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically through a file created with mode 0600."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temp.unlink(missing_ok=True)
    with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
        handle.write(data)
    temp.replace(path)


def scrub_command_file(run_dir: Path) -> bool:
    """Redact ``<run_dir>/command`` in place if it is a regular file with an unredacted ``env``.

    True when the file was rewritten.
    """
    path = run_dir / COMMAND_FILE
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        data = path.read_bytes()
    except OSError:
        return False
    scrubbed = scrubbed_document(data)
    if scrubbed is None or json.loads(scrubbed) == json.loads(data):
        return False
    write_private(path, scrubbed)
    return True


class CommandFileGuard:
    """A context manager around one ansible-runner run whose run directory is ``run_dir``.

    On entry it creates ``run_dir`` (mode 0700) and the pipe; on exit it makes sure no pipe and no
    unredacted ``command`` file is left.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / COMMAND_FILE
        self._thread: threading.Thread | None = None
        self._received = threading.Event()

    def __enter__(self) -> CommandFileGuard:
        self.run_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.run_dir.mkdir(mode=0o700)
        try:
            os.mkfifo(self.path, 0o600)
        except OSError as error:  # a file system without named pipes: the file is redacted after the run
            log.warning("cannot redact the command artifact as it is written; it is redacted when the run ends",
                        extra={"path": str(self.path), "error": str(error)})
            return self
        self._thread = threading.Thread(target=self._pump, name=f"command-file-{self.run_dir.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._unblock()
            self._thread.join(timeout=_UNBLOCK_SECONDS)
        with contextlib.suppress(OSError):
            if stat.S_ISFIFO(self.path.lstat().st_mode):
                self.path.unlink()
        scrub_command_file(self.run_dir)

    @property
    def received(self) -> bool:
        """True once ansible-runner's write went through the pipe (and was redacted)."""
        return self._received.is_set()

    def _pump(self) -> None:
        """Read what ansible-runner writes into the pipe; write it, redacted, as the real file."""
        try:
            with open(self.path, "rb") as pipe:  # blocks until ansible-runner opens it for writing
                data = pipe.read(MAX_COMMAND_BYTES + 1)
                while pipe.read(64 * 1024):  # never leave the writer blocked on a full pipe
                    pass
        except OSError as error:
            log.debug("command artifact pipe closed", extra={"path": str(self.path), "error": str(error)})
            return
        scrubbed = scrubbed_document(data) if data and len(data) <= MAX_COMMAND_BYTES else None
        try:
            if scrubbed is None:
                self.path.unlink(missing_ok=True)
                return
            write_private(self.path, scrubbed)
            self._received.set()
        except OSError as error:
            log.warning("could not write the command artifact", extra={"path": str(self.path), "error": str(error)})

    def _unblock(self) -> None:
        """The run ended without writing the file: open the pipe's other end so the reader returns."""
        deadline = time.monotonic() + _UNBLOCK_SECONDS
        while time.monotonic() < deadline:
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
                return
            except FileNotFoundError:
                return
            except OSError:  # ENXIO: the reader has not opened it yet
                time.sleep(0.01)
