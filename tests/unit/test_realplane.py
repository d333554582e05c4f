"""Unit tests for the real control plane's pure parts: the replace list derived from k8s.io/kubernetes'
go.mod (scripts/kube_sync.py), the pins of tools/kube/go.mod, the build flags (scripts/kube_build.py),
the cache layout, the PKI of a data dir, and the components' command lines (no binary is run)."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hybrid_operator.localcluster.realplane import build, launcher, pki

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
GO_MOD = ROOT / "tools" / "kube" / "go.mod"

UPSTREAM_GO_MOD = """\
module k8s.io/kubernetes

go 1.26.0

require (
\tgithub.com/google/cel-go v0.26.0
\tgo.etcd.io/etcd/client/v3 v3.6.8
\tk8s.io/api v0.0.0
\tk8s.io/apiserver v0.0.0
\tk8s.io/klog/v2 v2.140.0
\tk8s.io/utils v0.0.0-20260210185600-b8788abfbbc2
)

require k8s.io/gengo/v2 v2.0.0-20250922181213-ec3ebc5fd46b // indirect

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver
\tk8s.io/sample-controller => ./staging/src/k8s.io/sample-controller // not required, still staging
)
"""


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


kube_sync = _load("kube_sync")
kube_build = _load("kube_build")


def test_staging_version_follows_the_release() -> None:
    assert kube_sync.staging_version("v1.36.3") == "v0.36.3"
    assert kube_sync.staging_version("v1.37.12") == "v0.37.12"
    for bad in ("1.36.3", "v1.36", "v2.0.0", "v1.36.3-rc.0"):
        with pytest.raises(ValueError, match="not a Kubernetes release tag"):
            kube_sync.staging_version(bad)


def test_staging_modules_are_the_ones_replaced_with_staging_directories() -> None:
    modules = kube_sync.staging_modules(UPSTREAM_GO_MOD)
    assert modules == ["k8s.io/api", "k8s.io/apiserver", "k8s.io/sample-controller"]
    assert kube_sync.replace_args(modules, "v0.36.3") == [
        "-replace=k8s.io/api=k8s.io/api@v0.36.3",
        "-replace=k8s.io/apiserver=k8s.io/apiserver@v0.36.3",
        "-replace=k8s.io/sample-controller=k8s.io/sample-controller@v0.36.3",
    ]


def test_a_go_mod_it_does_not_understand_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("no `k8s.io/... => ./staging")):
        kube_sync.staging_modules("module k8s.io/kubernetes\n\nrequire k8s.io/api v0.36.3\n")
    pinned = UPSTREAM_GO_MOD.replace("\tk8s.io/api v0.0.0", "\tk8s.io/api v0.35.0")
    with pytest.raises(ValueError, match=re.escape("k8s.io/api is a staging module but required at v0.35.0")):
        kube_sync.staging_modules(pinned)
    crossed = UPSTREAM_GO_MOD.replace("k8s.io/api => ./staging/src/k8s.io/api",
                                      "k8s.io/api => ./staging/src/k8s.io/apiserver")
    with pytest.raises(ValueError, match=re.escape("points at k8s.io/apiserver")):
        kube_sync.staging_modules(crossed)


def _go_mod_pins() -> tuple[dict[str, str], dict[str, str]]:
    """tools/kube/go.mod's requires and replaces, read as text (no go command)."""
    text = GO_MOD.read_text()
    requires = dict(re.findall(r"^\s*(?:require\s+)?(\S+)\s+(v\S+)(?:\s*//.*)?$", text, re.MULTILINE))
    replaces = {old: f"{new}@{version}" for old, new, version in
                re.findall(r"^\s*(?:replace\s+)?(\S+)\s+=>\s+(\S+)\s+(v\S+)\s*$", text, re.MULTILINE)}
    return requires, replaces


def test_tools_go_mod_pins_one_kubernetes_release_and_one_etcd_release() -> None:
    requires, replaces = _go_mod_pins()
    assert requires["k8s.io/kubernetes"] == build.RELEASE
    staging = kube_sync.staging_version(build.RELEASE)
    k8s_replaces = {old: new for old, new in replaces.items() if old.startswith("k8s.io/")}
    assert len(k8s_replaces) >= 30
    assert all(new == f"{old}@{staging}" for old, new in k8s_replaces.items()), k8s_replaces
    etcd = {module: version for module, version in requires.items() if module.startswith("go.etcd.io/etcd/")}
    assert set(etcd) == set(kube_sync.ETCD_MODULES)
    assert set(etcd.values()) == {build.ETCD_RELEASE}
    assert "tool k8s.io/kubernetes/cmd/kube-apiserver" in GO_MOD.read_text().replace("tool (\n\t", "tool ")


def test_build_flags_are_upstreams() -> None:
    args = kube_build.build_args("v1.36.3", "2026-07-22T18:07:38Z", Path("/cache/bin.new"))
    assert "-trimpath" in args
    assert "-tags=selinux,notest,grpcnotrace" in args
    ldflags = next(arg for arg in args if arg.startswith("-ldflags="))
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X '{package}.gitVersion=v1.36.3'" in ldflags
        assert f"-X '{package}.gitMajor=1'" in ldflags
        assert f"-X '{package}.gitMinor=36'" in ldflags
        assert f"-X '{package}.buildDate=2026-07-22T18:07:38Z'" in ldflags
    assert args[-3:] == list(kube_build.PACKAGES.values())
    assert build.go_environment({"HOME": "/h"})["CGO_ENABLED"] == "0"


def test_the_stamp_changes_with_go_mod(tmp_path: Path) -> None:
    for name in kube_build.INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    args = kube_build.build_args("v1.36.3", "", Path("-"))
    first = kube_build.stamp_of(args, tmp_path)
    assert kube_build.stamp_of(args, tmp_path) == first
    (tmp_path / "go.sum").write_text("changed")
    assert kube_build.stamp_of(args, tmp_path) != first


def test_cache_layout_and_a_missing_build_names_make_kube(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path / "home")}
    assert build.release_dir("v1.36.3", environ) == tmp_path / "home/.cache/hybrid-operator/kube/v1.36.3"
    moved = {"HYBRID_CACHE": str(tmp_path / "c"), "HOME": "/nowhere"}
    assert build.release_dir("v1.36.3", moved) == tmp_path / "c/kube/v1.36.3"
    go = build.go_environment(moved)
    assert (go["GOMODCACHE"], go["GOCACHE"]) == (str(tmp_path / "c/kube/go/mod"), str(tmp_path / "c/kube/go/build"))
    with pytest.raises(build.BuildMissing, match=r"etcd, kube-apiserver, kube-controller-manager missing .*make kube"):
        build.binaries("v1.36.3", moved)
    bin_dir = tmp_path / "c/kube/v1.36.3/bin"
    bin_dir.mkdir(parents=True)
    for name in build.COMPONENTS:
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    assert build.binaries("v1.36.3", moved).apiserver == bin_dir / "kube-apiserver"


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _signed_by(leaf: x509.Certificate, ca: x509.Certificate) -> bool:
    public = ca.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)
    try:
        public.verify(leaf.signature, leaf.tbs_certificate_bytes, ec.ECDSA(leaf.signature_hash_algorithm))  # type: ignore[arg-type]
    except Exception:
        return False
    return True


def test_pki_two_cas_one_admin_token_private_keys(tmp_path: Path) -> None:
    keys = pki.ensure(tmp_path / "pki")
    cluster_ca, etcd_ca = _cert(keys.ca_cert), _cert(keys.etcd_ca_cert)
    apiserver = _cert(keys.apiserver_cert)
    assert _signed_by(apiserver, cluster_ca) and not _signed_by(apiserver, etcd_ca)
    names = apiserver.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("10.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in names.get_values_for_type(x509.DNSName)
    manager = _cert(keys.controller_manager_cert)
    assert manager.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:kube-controller-manager"
    assert _signed_by(manager, cluster_ca) and not _signed_by(manager, etcd_ca)  # no way into etcd
    assert ExtendedKeyUsageOID.CLIENT_AUTH in manager.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    for leaf in (keys.etcd_cert, keys.apiserver_etcd_cert):
        assert _signed_by(_cert(leaf), etcd_ca) and not _signed_by(_cert(leaf), cluster_ca)
    lines = keys.token_file.read_text().splitlines()
    assert len(lines) == 1
    token, user, uid, groups = lines[0].split(",", 3)
    assert (user, uid, groups) == ("admin", "admin", '"system:masters"')
    assert len(token) >= 40 and keys.admin_token() == token
    for path in keys.paths():
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o600 if path.suffix in (".key", ".csv") else 0o644), path
    assert stat.S_IMODE((tmp_path / "pki").stat().st_mode) == 0o700
    # reused whole when complete (kubeconfigs and tokens stay valid) ...
    assert pki.ensure(tmp_path / "pki").admin_token() == token
    # ... made again whole when a file is missing (never a mix of two generations)
    os.unlink(keys.etcd_key)
    again = pki.ensure(tmp_path / "pki")
    assert again.admin_token() != token
    assert _signed_by(_cert(again.etcd_cert), _cert(again.etcd_ca_cert))


def _binaries() -> build.Binaries:
    return build.Binaries(Path("/b/etcd"), Path("/b/kube-apiserver"), Path("/b/kube-controller-manager"))


def test_every_component_is_given_loopback_and_tls(tmp_path: Path) -> None:
    layout = launcher.Layout(tmp_path)
    keys = pki.Pki.at(tmp_path / "pki")
    options = launcher.RealOptions(port=7443, data_dir=tmp_path, audit_log=tmp_path / "audit.log")
    etcd = launcher.etcd_args(_binaries(), keys, layout, 2379, 2380)
    assert "--listen-client=127.0.0.1:2379" in etcd and "--listen-peer=127.0.0.1:2380" in etcd
    assert f"--trusted-ca-file={keys.etcd_ca_cert}" in etcd
    api = launcher.apiserver_args(_binaries(), keys, layout, options, 2379)
    for flag in ("--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=7443",
                 "--authorization-mode=Node,RBAC", "--feature-gates=ShardedListAndWatch=true",
                 "--etcd-servers=https://127.0.0.1:2379", "--service-account-issuer=https://kubernetes.default.svc",
                 "--service-cluster-ip-range=10.0.0.0/24", f"--token-auth-file={keys.token_file}",
                 f"--service-account-signing-key-file={keys.service_account_key}",
                 f"--audit-log-path={tmp_path / 'audit.log'}", f"--audit-policy-file={layout.audit_policy}"):
        assert flag in api, flag
    off = launcher.apiserver_args(_binaries(), keys, layout,
                                  launcher.RealOptions(port=7443, data_dir=tmp_path, sharded_list_watch=False), 1)
    assert "--feature-gates=ShardedListAndWatch=false" in off
    assert not any(arg.startswith("--audit") for arg in off)
    manager = launcher.controller_manager_args(_binaries(), keys, layout)
    assert {"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
            "--use-service-account-credentials=true", f"--root-ca-file={keys.ca_cert}"} <= set(manager)
    controllers = next(a for a in manager if a.startswith("--controllers=")).split("=", 1)[1].split(",")
    assert {"namespace-controller", "garbage-collector-controller", "deployment-controller",
            "replicaset-controller", "serviceaccount-token-controller",
            "persistentvolume-binder-controller"} <= set(controllers)
    assert not any(re.search(r"(?<![\d.])0\.0\.0\.0", arg) for arg in [*etcd, *api, *manager])


def test_the_controller_manager_kubeconfig_carries_a_certificate_not_a_token(tmp_path: Path) -> None:
    keys = pki.Pki.at(tmp_path)
    text = launcher.controller_manager_kubeconfig("https://127.0.0.1:7443", keys)
    assert "token" not in text
    assert str(keys.controller_manager_cert) in text and str(keys.controller_manager_key) in text

