"""The cluster side of a console consent (issue 37): the OE reads the Agent and its Connector and writes the
token Secret, with its own ServiceAccount token and only what the operator granted it.

For each Agent naming an MCP Connector with `auth.grant: authorization_code`, the operator pre-creates the
Secret `mcp-oauth-NAME` and a Role bound to the OE's ServiceAccount: `get` on that Agent and those
Connectors, `update` on those Secrets, each by name (`agent_operator/consent_access.py`). So the OE can
write no other Secret anywhere, and reads no Secret of an Agent's namespace at all. The decisions (which
connector, which issuer, the Secret's body) are `connector_consent.py`'s.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from agent_runtime.console.connector_consent import ISSUERS_ENV, ConsentTarget, allowed_issuers
from agent_runtime.oe.settings import ClientAuthSettings, SettingsError

GROUP_PATH = "/apis/agentengine.io/v1alpha1"


class ClusterUnavailable(Exception):
    """The API server did not answer, or refused the OE (its message names what was missing)."""


@dataclass(frozen=True)
class ConsentCluster:
    """Where the API server is, the OE's ServiceAccount token, and the issuers it may ask for a consent."""

    api_url: str
    token_path: Path
    ca_path: Path | None
    issuers: tuple[str, ...]
    timeout_s: float = 10.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ConsentCluster | None:
        """None outside a cluster (no KUBERNETES_SERVICE_HOST): the local mode's token directory, if any."""
        try:
            auth = ClientAuthSettings.from_env(env)
        except SettingsError:
            return None  # the OE's own start-up reports it
        if auth.api_url is None:
            return None
        ca = auth.service_account_dir / "ca.crt"
        return cls(
            api_url=auth.api_url.rstrip("/"),
            token_path=auth.service_account_dir / "token",
            ca_path=ca if ca.exists() else None,
            issuers=allowed_issuers(env.get(ISSUERS_ENV, "")),
        )

    async def agent(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get(f"{GROUP_PATH}/namespaces/{namespace}/agents/{name}")

    async def connector(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get(f"{GROUP_PATH}/namespaces/{namespace}/connectors/{name}")

    async def write_token_secret(self, target: ConsentTarget, body: dict[str, Any]) -> None:
        """Replace the pre-created Secret (update by name: the one verb the operator's Role grants)."""
        path = f"/api/v1/namespaces/{target.namespace}/secrets/{target.secret_name}"
        status, text = await self._request("PUT", path, body)
        if status == 404:
            raise ClusterUnavailable(
                f"the Secret {target.secret_name} does not exist in namespace {target.namespace} yet; the "
                "operator creates it when it reconciles the Agent: retry in a moment"
            )
        if status in (401, 403):
            raise ClusterUnavailable(
                f"the OE may not write the Secret {target.secret_name} in namespace {target.namespace} "
                f"(HTTP {status}); the operator grants it for the Agents' authorization_code connectors only"
            )
        if status != 200:
            raise ClusterUnavailable(f"the Kubernetes API answered {status} to the Secret's write: {text}")

    async def _get(self, path: str) -> dict[str, Any] | None:
        """The object, or None when it is not there or not granted to the OE (both read the same: the Role
        names only what the operator allows)."""
        status, text = await self._request("GET", path, None)
        if status in (403, 404):
            return None
        if status != 200:
            raise ClusterUnavailable(f"the Kubernetes API answered {status} to a read: {text}")
        try:
            found = json.loads(text)
        except ValueError:
            raise ClusterUnavailable("the Kubernetes API answered a read with no JSON") from None
        return found if isinstance(found, dict) else None

    async def _request(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, str]:
        """(status, the API's Status message or the body): never the request, which may hold a token."""
        try:
            token = self.token_path.read_text(encoding="utf-8").strip()  # the kubelet rotates it in place
        except OSError as exc:
            raise ClusterUnavailable(
                f"the OE's ServiceAccount token {self.token_path} cannot be read ({type(exc).__name__})"
            ) from None
        context: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(self.ca_path)) if self.ca_path is not None else True
        )
        headers = {"authorization": f"Bearer {token}", "accept": "application/json"}
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        url = self.api_url + path
        try:
            async with (
                aiohttp.ClientSession(
                    timeout=timeout, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False
                ) as session,
                session.request(method, url, json=body, headers=headers, ssl=context) as answer,
            ):
                text = await answer.text()
                status = answer.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ClusterUnavailable(
                f"the Kubernetes API at {self.api_url} did not answer ({type(exc).__name__})"
            ) from None
        if status == 200 and method == "GET":
            return status, text
        return status, _status_message(text)


def _status_message(text: str) -> str:
    """The API server's Status message (it names the verb and resource refused), bounded; never a body."""
    try:
        message = json.loads(text).get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message)[:300] if message else ""
