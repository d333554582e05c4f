"""Serving certificates and kubeconfigs for the local clusters (embedded, and the real control plane).

kubectl and helm (client-go's kubeconfig loader) only send credentials to
``https`` servers: against ``http://`` they silently drop the bearer token.  So
the server speaks TLS with a certificate signed by its own CA, generated once
per data dir (and kept there, so a kubeconfig stays valid across restarts);
the kubeconfig carries the CA, so every client verifies the server properly.
"""

from __future__ import annotations

import base64
import ipaddress
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from hybrid_operator.localcluster import clock, files

VALIDITY = timedelta(days=3650)


@dataclass(frozen=True)
class Certificates:
    """PEM files of the CA and the serving certificate."""

    ca_cert: Path
    server_cert: Path
    server_key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.server_cert, self.server_key)
        return context


def name(common_name: str, organization: str | None = None) -> x509.Name:
    """A subject: CN, and O when given (Kubernetes reads a client certificate's O as its groups)."""
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def new_ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA valid for :data:`VALIDITY` (backdated five minutes for clock skew)."""
    now = clock.now() - timedelta(minutes=5)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False),
                       critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], subject: x509.Name, *,
          server_names: Sequence[str] = (), client: bool = False,
          ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A leaf certificate signed by ``ca``: serving ``server_names`` (DNS names or IPs), for clients, or both."""
    ca_cert, ca_key = ca
    now = clock.now() - timedelta(minutes=5)
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH] if server_names else []
    if client:
        usages.append(x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if server_names:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(n) for n in server_names]),
                                        critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _general_name(value: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(value))
    except ValueError:
        return x509.DNSName(value)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def kubeconfig_text(server: str, token: str, ca_pem: bytes) -> str:
    """A kubeconfig for ``server``: its CA, and a bearer token (context ``hybrid``, namespace default)."""
    cluster = {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hybrid", "cluster": cluster}],
        "users": [{"name": "hybrid-admin", "user": {"token": token}}],
        "contexts": [{"name": "hybrid", "context": {"cluster": "hybrid", "user": "hybrid-admin",
                                                    "namespace": "default"}}],
        "current-context": "hybrid",
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def ensure(directory: Path) -> Certificates:
    """The certificates in ``directory``, created on first use."""
    certs = Certificates(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    if certs.ca_cert.exists() and certs.server_cert.exists() and certs.server_key.exists():
        return certs
    directory.mkdir(parents=True, exist_ok=True)
    ca = new_ca("hybrid-operator-local-ca")
    server_cert, server_key = issue(ca, name("hybrid-operator-apiserver"), server_names=("localhost", "127.0.0.1"))
    files.write_atomically(certs.server_key, key_pem(server_key), 0o600)
    files.write_atomically(certs.server_cert, cert_pem(server_cert), 0o644)
    files.write_atomically(certs.ca_cert, cert_pem(ca[0]), 0o644)
    return certs
