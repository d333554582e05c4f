"""Where the node agent's API server is and how it proves who it is: read from a kubeconfig.

The agent is a plain API client, so it takes what kubectl takes: a kubeconfig's current context (or
the one named), its cluster's ``server`` and CA (``certificate-authority-data`` or a file, paths
relative to the kubeconfig as client-go reads them, or ``insecure-skip-tls-verify``), and its user's
bearer token (``token`` or ``tokenFile``), client certificate and key (inline or files) or basic
credentials. Exec plugins and auth providers run other programs, which this does not do: such a
kubeconfig is refused with a message saying so. Every refusal names the file and the field.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class KubeconfigError(Exception):
    """The kubeconfig cannot be used; the message names the file, the field and what to do."""


@dataclass(frozen=True)
class Endpoint:
    """An API server's base URL, the TLS context that trusts it (None for http) and the request headers."""

    server: str
    tls: ssl.SSLContext | None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def with_token(cls, server: str, ca_pem: bytes, token: str) -> Endpoint:
        """A server whose CA and bearer token are known already (the real control plane's admin)."""
        context = ssl.create_default_context(cadata=ca_pem.decode("ascii"))
        return cls(server.rstrip("/"), context, {"Authorization": f"Bearer {token}"})


def _section(config: dict[str, Any], kind: str, name: str, path: Path) -> dict[str, Any]:
    for entry in config.get(f"{kind}s") or []:
        if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get(kind), dict):
            return dict(entry[kind])
    raise KubeconfigError(f"{path}: no {kind} named {name!r} in {kind}s")


def _bytes(section: dict[str, Any], key: str, path: Path) -> bytes | None:
    """``<key>-data`` (base64) or the file ``<key>`` (relative to the kubeconfig), or None."""
    inline = section.get(f"{key}-data")
    if inline:
        try:
            return base64.b64decode(str(inline), validate=True)
        except (binascii.Error, ValueError) as bad:
            raise KubeconfigError(f"{path}: {key}-data is not base64") from bad
    named = section.get(key)
    if not named:
        return None
    file = Path(os.path.expanduser(str(named)))
    file = file if file.is_absolute() else path.parent / file
    try:
        return file.read_bytes()
    except OSError as missing:
        raise KubeconfigError(f"{path}: {key} {file}: {missing.strerror}") from missing


def _client_certificate(context: ssl.SSLContext, cert: bytes, key: bytes, path: Path) -> None:
    """Load a client certificate and key given as bytes (the ssl module only reads files: a private temp dir)."""
    with tempfile.TemporaryDirectory(prefix="hybrid-node-") as scratch:
        cert_file, key_file = Path(scratch) / "client.crt", Path(scratch) / "client.key"
        cert_file.write_bytes(cert)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key)
        try:
            context.load_cert_chain(cert_file, key_file)
        except ssl.SSLError as bad:
            raise KubeconfigError(f"{path}: client-certificate/client-key do not load: {bad}") from bad


def _tls(cluster: dict[str, Any], user: dict[str, Any], path: Path) -> ssl.SSLContext:
    ca = _bytes(cluster, "certificate-authority", path)
    try:
        context = ssl.create_default_context(cadata=ca.decode("ascii")) if ca else ssl.create_default_context()
    except (ssl.SSLError, UnicodeDecodeError) as bad:
        raise KubeconfigError(f"{path}: certificate-authority is not a PEM certificate: {bad}") from bad
    if cluster.get("insecure-skip-tls-verify") is True:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert, key = _bytes(user, "client-certificate", path), _bytes(user, "client-key", path)
    if (cert is None) != (key is None):
        raise KubeconfigError(f"{path}: a client certificate needs both client-certificate and client-key")
    if cert is not None and key is not None:
        _client_certificate(context, cert, key, path)
    return context


def _headers(user: dict[str, Any], path: Path) -> dict[str, str]:
    for unsupported in ("exec", "auth-provider"):
        if user.get(unsupported):
            raise KubeconfigError(f"{path}: the user runs an {unsupported} plugin, which the node agent does not "
                                  "run: give it a kubeconfig with a token or a client certificate")
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token_path = Path(os.path.expanduser(str(user["tokenFile"])))
        token_path = token_path if token_path.is_absolute() else path.parent / token_path
        try:
            token = token_path.read_text(encoding="utf-8").strip()
        except OSError as missing:
            raise KubeconfigError(f"{path}: tokenFile {token_path}: {missing.strerror}") from missing
    if token:
        return {"Authorization": f"Bearer {token}"}
    if user.get("username") and user.get("password"):
        basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        return {"Authorization": f"Basic {basic}"}
    return {}


def load(path: Path, context_name: str | None = None) -> Endpoint:
    """The server of ``path``'s current context (or ``context_name``) and how to reach it."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as unreadable:
        raise KubeconfigError(f"{path}: cannot read it: {unreadable.strerror}") from unreadable
    except yaml.YAMLError as bad:
        raise KubeconfigError(f"{path}: not YAML: {bad}") from bad
    if not isinstance(config, dict):
        raise KubeconfigError(f"{path}: not a kubeconfig (expected a mapping with clusters, users and contexts)")
    name = context_name or config.get("current-context")
    if not name:
        raise KubeconfigError(f"{path}: no current-context: pass --context")
    context = _section(config, "context", str(name), path)
    cluster = _section(config, "cluster", str(context.get("cluster", "")), path)
    user = _section(config, "user", str(context.get("user", "")), path) if context.get("user") else {}
    server = str(cluster.get("server") or "").rstrip("/")
    if not server.startswith(("https://", "http://")):
        raise KubeconfigError(f"{path}: cluster {context.get('cluster')!r} has no https:// or http:// server")
    tls = _tls(cluster, user, path) if server.startswith("https://") else None
    return Endpoint(server, tls, _headers(user, path))
