"""The Kubernetes API server of a kubeconfig context, as kubectl reaches it: its URL, TLS (the cluster's CA,
or none when `insecure-skip-tls-verify`), and the user's credentials (a bearer token, its exec plugin's, or a
client certificate). Only what finding the OE and port-forwarding to it need: GETs and a websocket's TLS."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_runtime.cli.errors import DENIED, ERROR, CliError
from agent_runtime.cli.kubeconfig import Context, token_from_user

SERVER_FIX = "pass --server URL (or set AGENTENGINE_SERVER) to reach the OE another way"


def _pem(entry: Mapping[str, Any], key: str, *, base_dir: Path) -> bytes | None:
    """`key-data` (base64) or the file `key` (relative to the kubeconfig), as PEM bytes; None when unset."""
    if entry.get(f"{key}-data"):
        return base64.b64decode(str(entry[f"{key}-data"]))
    if entry.get(key):
        path = Path(str(entry[key])).expanduser()
        path = path if path.is_absolute() else base_dir / path
        try:
            return path.read_bytes()
        except OSError as exc:
            raise CliError(f"the kubeconfig's {key} {path} is unreadable ({exc.strerror})") from None
    return None


def tls_context(context: Context) -> ssl.SSLContext:
    """The TLS the context's cluster asks for, with the user's client certificate when it has one."""
    cluster = context.cluster
    tls = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify"):
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    else:
        ca = _pem(cluster, "certificate-authority", base_dir=context.base_dir)
        if ca is not None:
            tls.load_verify_locations(cadata=ca.decode("ascii", errors="replace"))
    cert = _pem(context.user, "client-certificate", base_dir=context.base_dir)
    key = _pem(context.user, "client-key", base_dir=context.base_dir)
    if cert is not None and key is not None:
        # ssl loads a certificate chain from files only: a private directory, removed at once.
        with tempfile.TemporaryDirectory(prefix="agentengine-") as directory:
            cert_file, key_file = Path(directory) / "cert.pem", Path(directory) / "key.pem"
            for path, data in ((cert_file, cert), (key_file, key)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            tls.load_cert_chain(str(cert_file), str(key_file))
    return tls


@dataclass(frozen=True)
class KubeAPI:
    """One context's API server: where, over which TLS, with which headers."""

    context: Context
    server: str
    tls: ssl.SSLContext
    headers: Mapping[str, str]

    @classmethod
    def of(cls, context: Context, *, token: str | None = None) -> KubeAPI:
        """The context's API server; `token` is the user's, when the caller has read it already."""
        server = str(context.cluster.get("server") or "").rstrip("/")
        if not server.startswith(("https://", "http://")):
            raise CliError(
                f"kubeconfig context {context.name!r} names no API server (clusters[].cluster.server); "
                + SERVER_FIX
            )
        if token is None:
            token = token_from_user(context.user, base_dir=context.base_dir, cluster=context.cluster)
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return cls(context=context, server=server, tls=tls_context(context), headers=headers)

    def get(self, path: str, *, params: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        """GET a JSON object: its status and body ({} when it is not JSON); an error naming the fix when the
        API server cannot be reached or refuses the credentials."""
        import httpx

        try:
            with httpx.Client(verify=self.tls, timeout=15.0, trust_env=False) as client:
                response = client.get(self.server + path, params=params, headers=dict(self.headers))
        except httpx.TransportError as exc:
            raise CliError(
                f"cannot reach the Kubernetes API server {self.server} of context {self.context.name!r} "
                f"({exc.__class__.__name__}); check the kubeconfig, or " + SERVER_FIX
            ) from None
        if response.status_code == 401:
            raise CliError(
                f"the API server of context {self.context.name!r} refused the kubeconfig's credentials "
                "(401); log in again (kubectl get --raw /version checks), or " + SERVER_FIX,
                exit_code=DENIED,
            )
        try:
            body = response.json()
        except ValueError:
            body = {}
        return response.status_code, body if isinstance(body, dict) else {}

    def websocket_url(self, path: str) -> str:
        return (
            ("wss://" if self.server.startswith("https://") else "ws://")
            + self.server.split("://", 1)[1]
            + path
        )


def forbidden(api: KubeAPI, *, what: str, namespace: str) -> CliError:
    return CliError(
        f"the kubeconfig's user may not {what} in namespace {namespace} (context {api.context.name!r}); "
        "ask for that right, or " + SERVER_FIX,
        exit_code=DENIED,
    )


def unexpected(api: KubeAPI, *, status: int, what: str) -> CliError:
    return CliError(f"the API server answered {status} to {what}; " + SERVER_FIX, exit_code=ERROR)
