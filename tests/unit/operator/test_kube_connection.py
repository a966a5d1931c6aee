"""The operator's API connection: inline client credentials from a kubeconfig leave no file behind."""

from __future__ import annotations

import asyncio
import base64
import os
from types import SimpleNamespace

from agent_operator.kube import Connection, KubeApi
from tests.cluster.pki import make_ca


def test_inline_client_certificate_and_key_files_are_removed_once_loaded() -> None:
    pair = make_ca("operator-client")
    info = SimpleNamespace(
        server="https://127.0.0.1:6443/",
        ca_data=base64.b64encode(pair.cert_pem).decode(),
        ca_path=None,
        certificate_data=base64.b64encode(pair.cert_pem).decode(),
        certificate_path=None,
        private_key_data=base64.b64encode(pair.key_pem).decode(),
        private_key_path=None,
        token=None,
        insecure=False,
    )
    connection = Connection.from_kopf(info)
    assert len(connection.temp_files) == 2
    assert all(os.path.exists(path) for path in connection.temp_files)
    api = KubeApi(connection)
    assert not any(os.path.exists(path) for path in connection.temp_files)
    asyncio.run(api.aclose())
