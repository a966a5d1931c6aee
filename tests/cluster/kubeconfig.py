"""Kubeconfig files for the test control plane: an admin certificate one, or a ServiceAccount token one."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kubeconfig_document(
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    client_cert_pem: bytes | None = None,
    client_key_pem: bytes | None = None,
    token: str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A single-context kubeconfig with everything inline, authenticating by certificate or by token."""
    if (client_cert_pem is None) == (token is None):
        raise ValueError("kubeconfig_document: give either client_cert_pem+client_key_pem or token")
    credentials: dict[str, str] = {}
    if token is not None:
        credentials["token"] = token
    else:
        if client_key_pem is None:
            raise ValueError("kubeconfig_document: client_cert_pem needs client_key_pem")
        credentials["client-certificate-data"] = _b64(client_cert_pem)
        credentials["client-key-data"] = _b64(client_key_pem)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "agent-engine-test",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [
            {
                "name": "agent-engine-test",
                "context": {"cluster": "agent-engine-test", "user": user, "namespace": namespace},
            }
        ],
        "current-context": "agent-engine-test",
    }


def write_kubeconfig(path: Path, document: dict[str, Any]) -> Path:
    """Write a kubeconfig readable by its owner only (it holds a credential)."""
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
