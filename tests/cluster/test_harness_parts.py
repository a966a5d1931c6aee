"""The harness's pure parts: pins, command lines stay on loopback, certificates, kubeconfigs, stale dirs."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from tests.cluster import pki
from tests.cluster.controlplane import (
    BUILD_SCRIPT,
    Ports,
    apiserver_args,
    controller_manager_args,
    etcd_args,
    kwok_args,
    pinned_versions,
    scheduler_args,
    sweep_stale_dirs,
)
from tests.cluster.kubeconfig import kubeconfig_document, write_kubeconfig


def test_pins_are_read_from_the_build_script() -> None:
    pins = pinned_versions()
    assert set(pins) >= {"K8S_VERSION", "ETCD_VERSION", "KWOK_VERSION", "KUBECTL_LAYER_VERSION"}
    assert set(pins) - {"K8S_VERSION", "ETCD_VERSION", "KWOK_VERSION", "KUBECTL_LAYER_VERSION"} == {
        "COREDNS_VERSION",
        "KUBE_ROUTER_VERSION",
    }  # the real node's (build_bins.sh --real-node)
    assert re.fullmatch(r"v1\.3\d\.\d+", pins["K8S_VERSION"])
    assert re.fullmatch(r"v3\.6\.\d+", pins["ETCD_VERSION"])
    assert pinned_versions('K8S_VERSION="${K8S_VERSION:-v1.2.3}"\n') == {"K8S_VERSION": "v1.2.3"}


def test_build_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(BUILD_SCRIPT)], check=True)


def test_every_component_listens_on_loopback_only(tmp_path: Path) -> None:
    ports = Ports(1, 2, 3, 4, 5)
    argv = [
        *etcd_args(bin_dir=tmp_path, data_dir=tmp_path, ports=ports),
        *apiserver_args(bin_dir=tmp_path, pki_dir=tmp_path, ports=ports),
        *controller_manager_args(bin_dir=tmp_path, work_dir=tmp_path, pki_dir=tmp_path, ports=ports),
        *scheduler_args(bin_dir=tmp_path, work_dir=tmp_path, ports=ports),
        *kwok_args(bin_dir=tmp_path, work_dir=tmp_path),
    ]
    addresses = re.findall(r"\b\d+\.\d+\.\d+\.\d+\b", " ".join(argv))
    assert addresses and all(a.startswith("127.") for a in addresses)
    assert not any("0.0.0.0" in a or "localhost" in a for a in argv)


def test_issued_certificate_is_signed_by_the_ca_and_names_its_hosts() -> None:
    ca = pki.make_ca()
    leaf = pki.issue(ca, common_name="kube-apiserver", hosts=("127.0.0.1", "kubernetes"), server=True)
    cert = x509.load_pem_x509_certificate(leaf.cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["kubernetes"]


def test_kubeconfig_needs_exactly_one_credential(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="either client_cert_pem"):
        kubeconfig_document(server="https://127.0.0.1:1", ca_pem=b"ca", user="u")
    with pytest.raises(ValueError, match="either client_cert_pem"):
        kubeconfig_document(
            server="https://127.0.0.1:1", ca_pem=b"ca", user="u", token="t", client_cert_pem=b"c"
        )
    path = write_kubeconfig(
        tmp_path / "kc", kubeconfig_document(server="https://127.0.0.1:1", ca_pem=b"ca", user="u", token="t")
    )
    assert path.stat().st_mode & 0o077 == 0
    assert yaml.safe_load(path.read_text())["users"] == [{"name": "u", "user": {"token": "t"}}]


def test_sweep_removes_only_directories_of_dead_harnesses(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"agent-engine-cp-{dead.pid}-x"
    live = tmp_path / f"agent-engine-cp-{os.getpid()}-y"
    other = tmp_path / "something-else"
    for d in (stale, live, other):
        d.mkdir()
    assert sweep_stale_dirs(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and other.exists()
