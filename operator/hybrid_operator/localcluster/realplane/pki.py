"""The certificates, keys and token of a real control plane, made once per data dir and kept there.

Two CAs, so that no credential of the Kubernetes side opens etcd: the *cluster* CA signs
kube-apiserver's serving certificate and kube-controller-manager's client certificate (``--client-ca-file``
trusts it); the *etcd* CA signs etcd's serving/peer certificate and kube-apiserver's etcd client
certificate (etcd trusts only it). The token file holds one line, the admin (``system:masters``): the
controller-manager authenticates with its certificate as ``system:kube-controller-manager``, which the
default RBAC policy grants what it needs and nothing more. The ServiceAccount key pair signs tokens.

Everything is written under ``<data dir>/pki`` (``0700``; keys and the token file ``0600``, created
so). A directory missing any file is made again whole, so a half-made one is never used; a complete one
is reused, so kubeconfigs and ServiceAccount tokens stay valid across restarts.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, fields
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from hybrid_operator.localcluster import files, tls

#: the in-cluster name and Service IP of the API server (first IP of --service-cluster-ip-range)
SERVICE_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local", "10.0.0.1")
LOOPBACK_NAMES = ("localhost", "127.0.0.1")
ADMIN_USER = "admin"
ADMIN_GROUP = "system:masters"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"


@dataclass(frozen=True)
class Pki:
    """The files of a data dir's PKI (all absolute paths)."""

    ca_cert: Path
    apiserver_cert: Path
    apiserver_key: Path
    controller_manager_cert: Path
    controller_manager_key: Path
    etcd_ca_cert: Path
    etcd_cert: Path
    etcd_key: Path
    apiserver_etcd_cert: Path
    apiserver_etcd_key: Path
    service_account_key: Path
    service_account_pub: Path
    token_file: Path

    @classmethod
    def at(cls, directory: Path) -> Pki:
        base = directory.absolute()
        return cls(
            ca_cert=base / "ca.crt",
            apiserver_cert=base / "apiserver.crt", apiserver_key=base / "apiserver.key",
            controller_manager_cert=base / "controller-manager.crt",
            controller_manager_key=base / "controller-manager.key",
            etcd_ca_cert=base / "etcd-ca.crt", etcd_cert=base / "etcd.crt", etcd_key=base / "etcd.key",
            apiserver_etcd_cert=base / "apiserver-etcd-client.crt",
            apiserver_etcd_key=base / "apiserver-etcd-client.key",
            service_account_key=base / "sa.key", service_account_pub=base / "sa.pub",
            token_file=base / "tokens.csv",
        )

    def paths(self) -> list[Path]:
        return [getattr(self, field.name) for field in fields(self)]

    def admin_token(self) -> str:
        """The admin's bearer token: the first field of the token file's one line."""
        return self.token_file.read_text(encoding="utf-8").split(",", 1)[0].strip()


def token_line(token: str) -> str:
    """kube-apiserver's --token-auth-file format: token,user,uid,"group,..."."""
    return f'{token},{ADMIN_USER},{ADMIN_USER},"{ADMIN_GROUP}"\n'


def ensure(directory: Path) -> Pki:
    """The PKI in ``directory``: reused when complete, else made (again) whole."""
    pki = Pki.at(directory)
    files.private_dir(pki.ca_cert.parent)
    if all(path.exists() for path in pki.paths()):
        for path in pki.paths():
            if path.suffix in (".key", ".csv"):
                files.tighten(path, files.PRIVATE_FILE)
        return pki
    _create(pki)
    return pki


def _write_pair(cert_path: Path, key_path: Path, pair: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]) -> None:
    cert, key = pair
    files.write_atomically(key_path, tls.key_pem(key), files.PRIVATE_FILE)
    files.write_atomically(cert_path, tls.cert_pem(cert), 0o644)


def _create(pki: Pki) -> None:
    cluster_ca = tls.new_ca("hybrid-operator-real-ca")
    etcd_ca = tls.new_ca("hybrid-operator-etcd-ca")
    _write_pair(pki.apiserver_cert, pki.apiserver_key,
                tls.issue(cluster_ca, tls.name("kube-apiserver"), server_names=(*LOOPBACK_NAMES, *SERVICE_NAMES)))
    _write_pair(pki.controller_manager_cert, pki.controller_manager_key,
                tls.issue(cluster_ca, tls.name(CONTROLLER_MANAGER_USER), client=True))
    _write_pair(pki.etcd_cert, pki.etcd_key,
                tls.issue(etcd_ca, tls.name("etcd"), server_names=LOOPBACK_NAMES, client=True))
    _write_pair(pki.apiserver_etcd_cert, pki.apiserver_etcd_key,
                tls.issue(etcd_ca, tls.name("kube-apiserver-etcd-client"), client=True))
    service_account = ec.generate_private_key(ec.SECP256R1())
    files.write_atomically(pki.service_account_key, tls.key_pem(service_account), files.PRIVATE_FILE)
    files.write_atomically(pki.service_account_pub, service_account.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo), 0o644)
    files.write_atomically(pki.token_file, token_line(secrets.token_urlsafe(32)), files.PRIVATE_FILE)
    files.write_atomically(pki.etcd_ca_cert, tls.cert_pem(etcd_ca[0]), 0o644)
    # the cluster CA last; neither CA key is kept (nothing signs later)
    files.write_atomically(pki.ca_cert, tls.cert_pem(cluster_ca[0]), 0o644)
