"""Serving certificates for the embedded API server.

kubectl and helm (client-go's kubeconfig loader) only send credentials to
``https`` servers: against ``http://`` they silently drop the bearer token.  So
the server speaks TLS with a certificate signed by its own CA, generated once
per data dir (and kept there, so a kubeconfig stays valid across restarts);
the kubeconfig carries the CA, so every client verifies the server properly.
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

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


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def ensure(directory: Path) -> Certificates:
    """The certificates in ``directory``, created on first use."""
    certs = Certificates(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    if certs.ca_cert.exists() and certs.server_cert.exists() and certs.server_key.exists():
        return certs
    directory.mkdir(parents=True, exist_ok=True)
    now = clock.now() - timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("hybrid-operator-local-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False),
                       critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("hybrid-operator-apiserver"))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files.write_atomically(certs.server_key, server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()), 0o600)
    files.write_atomically(certs.server_cert, server_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    files.write_atomically(certs.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return certs
