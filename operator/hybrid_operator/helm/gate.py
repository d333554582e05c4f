"""The operator's side of helm's post-renderer: every manifest helm renders is checked before it is applied.

Why this module exists: helm renders and applies in one process, so the only manifest worth checking
is the one helm holds between the two (issue 28 item 4). helm v4 hands that manifest, hooks
included, to a post-renderer plugin; ours (:mod:`hybrid_operator.helm.gate_plugin`) passes it to
:class:`ManifestGate` over a Unix socket and passes it on unchanged only when the gate admits it,
so what is checked is byte for byte what helm applies, with no second render to differ from it.
A refused manifest makes helm stop before it stores a release or applies an object.

The gate lives in a directory of its own made with ``mkdtemp`` (mode 0700, a random name) and
holding the plugin (``plugins/hybrid-operator-gate/plugin.yaml``) and the socket. It is removed when
the operator stops; :func:`hybrid_operator.processes.sweep_dead_dirs` removes a killed operator's.
The directory is in the system's temporary directory rather than the artifacts directory because a
Unix socket's path may not be longer than 107 bytes.

Each helm command that renders (install, upgrade and their dry-runs) gets a *ticket*
(``--post-renderer-args``): it says which release namespace and which policy (``allowCrossNamespace``)
the manifest is checked against, and carries the refusal back to the caller, which raises a
:class:`~hybrid_operator.helm.client.HelmError` of kind ``REFUSED`` with it instead of helm's own
"post-renderer failed".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hybrid_operator import errors, processes
from hybrid_operator.helm import gate_plugin, manifestcheck
from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ClusterClient

log = logging.getLogger(__name__)

PLUGIN = "hybrid-operator-gate"
DIR_PREFIX = "hybrid-helm-gate-"
#: the largest manifest the gate reads (helm's own release storage refuses far smaller ones)
MAX_MANIFEST = 64 * 1024 * 1024
#: a Unix socket's path must fit in sun_path (108 bytes with its NUL)
_MAX_SOCKET_PATH = 100


@dataclass
class Ticket:
    """One helm command's passage through the gate: the release namespace, the policy, and the verdict."""

    id: str
    namespace: str
    cross_namespace: bool
    #: why the manifest was refused (None: not refused, or never shown)
    refusal: str | None = None


@dataclass
class ManifestGate:
    """Checks every manifest helm renders (start it before helm runs; close it at the end)."""

    namespaced: manifestcheck.Namespaced
    directory: Path | None = None
    _tickets: dict[str, Ticket] = field(default_factory=dict)
    _server: asyncio.AbstractServer | None = None

    @property
    def socket_path(self) -> Path:
        if self.directory is None:
            raise RuntimeError("the manifest gate is not started")
        return self.directory / "s"

    async def start(self) -> None:
        parent = Path(tempfile.gettempdir())
        processes.sweep_dead_dirs(parent, DIR_PREFIX)
        if len(str(parent)) + 40 > _MAX_SOCKET_PATH:
            parent = Path("/tmp")  # mkdtemp below makes a private directory there
        self.directory = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=parent))
        _write_plugin(self.directory / "plugins" / PLUGIN)
        self._server = await asyncio.start_unix_server(self._answer, path=str(self.socket_path),
                                                       limit=MAX_MANIFEST)

    def env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """What helm's environment needs for the plugin: it first on helm's plugin path, and the socket."""
        if self.directory is None:
            raise RuntimeError("the manifest gate is not started")
        plugins = [str(self.directory / "plugins"), environ.get("HELM_PLUGINS") or _default_plugins(environ)]
        return {"HELM_PLUGINS": os.pathsep.join(plugins), gate_plugin.SOCKET_ENV: str(self.socket_path)}

    @contextlib.contextmanager
    def ticket(self, namespace: str, *, cross_namespace: bool) -> Iterator[Ticket]:
        """A ticket for one helm command (its flags: :func:`flags`), valid until the block ends."""
        ticket = Ticket(secrets.token_hex(16), namespace, cross_namespace)
        self._tickets[ticket.id] = ticket
        try:
            yield ticket
        finally:
            self._tickets.pop(ticket.id, None)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            key = (await reader.readline()).decode(errors="replace").strip()
            manifest = await _read_all(reader)
            ticket = self._tickets.get(key)
            if ticket is None:
                answer = "refused: unknown ticket (the gate admits only the helm commands the operator started)"
            else:
                try:
                    ticket.refusal = await self._verdict(ticket, manifest)
                except Exception as exc:  # a check that fails refuses: nothing unchecked is applied
                    log.error("manifest gate: the check failed", extra={"error": repr(exc)})
                    ticket.refusal = f"the rendered manifest could not be checked ({exc!r}), nothing was applied"
                answer = "refused: " + ticket.refusal if ticket.refusal else ""
            writer.write(gate_plugin.ADMITTED if not answer else answer.encode())
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            log.warning("manifest gate: a post-renderer call failed", extra={"error": str(exc)})
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _verdict(self, ticket: Ticket, manifest: bytes | None) -> str | None:
        """None when ``manifest`` may be applied, else why not (what a condition and an Event say)."""
        if manifest is None:
            return f"the rendered manifest is larger than {MAX_MANIFEST // (1024 * 1024)} MiB"
        text = manifest.decode("utf-8", errors="replace")
        problems = await asyncio.to_thread(manifestcheck.refusals, text, ticket.namespace,
                                           cross_namespace=ticket.cross_namespace, namespaced=self.namespaced)
        if not problems:
            return None
        hint = ("; a chart that writes a value without quoting it lets the value add YAML of its own: quote "
                "every value ({{ .Values.x | quote }})")
        if any(" names namespace " in problem for problem in problems):
            hint += ("; set allowCrossNamespace: true on the watch if the chart is meant to write into other "
                     "namespaces")
        return "the rendered manifest was refused, nothing was applied: " + manifestcheck.summary(problems) + hint


def flags(ticket: Ticket) -> list[str]:
    """helm's flags that send a command's manifest through the gate with ``ticket``."""
    return ["--post-renderer", PLUGIN, "--post-renderer-args", ticket.id]


def discovery(cluster: ClusterClient) -> manifestcheck.Namespaced:
    """Whether a kind is namespaced, as the cluster's discovery says (None: not served, or no answer)."""

    def namespaced(api_version: str, kind: str) -> bool | None:
        group, version = objects.group_version(api_version)
        try:
            return cluster.resolve(group, version, kind).namespaced
        except errors.TemporaryError:
            return None

    return namespaced


async def _read_all(reader: asyncio.StreamReader) -> bytes | None:
    """Everything until the client's end of writing; None beyond :data:`MAX_MANIFEST` bytes."""
    chunks = []
    size = 0
    while chunk := await reader.read(1024 * 1024):
        size += len(chunk)
        if size > MAX_MANIFEST:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _write_plugin(directory: Path) -> None:
    """The plugin helm finds on its plugin path: this Python runs :mod:`gate_plugin` (no shell, no site)."""
    script = Path(gate_plugin.__file__).resolve()
    command = [str(Path(sys.executable)), "-I", "-S", str(script)]
    if any("$" in part for part in command):  # helm expands $NAME in a plugin's command line
        raise errors.ConfigurationError(f"cannot run the helm post-renderer: a path has a '$' in it ({command})")
    directory.mkdir(parents=True, mode=0o700)
    document = {"apiVersion": "v1", "name": PLUGIN, "version": "1.0.0", "type": "postrenderer/v1",
                "runtime": "subprocess",
                "runtimeConfig": {"platformCommand": [{"command": command[0], "args": command[1:]}]}}
    (directory / "plugin.yaml").write_text(yaml.safe_dump(document, sort_keys=False))


def _default_plugins(environ: Mapping[str, str]) -> str:
    """helm's own plugin directory when ``HELM_PLUGINS`` is not set (``$HELM_DATA_HOME/plugins``)."""
    data = environ.get("HELM_DATA_HOME") or os.path.join(
        environ.get("XDG_DATA_HOME") or os.path.join(environ.get("HOME", "~"), ".local", "share"), "helm")
    return os.path.join(data, "plugins")
