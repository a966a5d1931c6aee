"""A small async Kubernetes REST client on httpx that counts every request it makes.

kopf does the watching; this client does the operator's own reads and writes, so each one is visible in
`requests` (by verb) and, for writes, logged.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import ssl
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger("agent_operator.kube")

PLURALS = {
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "ServiceAccount": "serviceaccounts",
    "Service": "services",
    "Deployment": "deployments",
    "ReplicaSet": "replicasets",
    "NetworkPolicy": "networkpolicies",
    "Event": "events",
    "Agent": "agents",
    "Connector": "connectors",
}
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Metadata only (names, labels, resourceVersion): a watch of every Secret never carries a Secret's data.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
WATCH_SECONDS = 290  # the server ends each watch after this; the client's read timeout is a little longer


def collection_path(api_version: str, kind: str, namespace: str | None) -> str:
    """A kind's collection in one namespace, or across all of them."""
    if namespace:
        return object_path(api_version, kind, namespace)
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    return f"{base}/{PLURALS[kind]}"


class ApiError(Exception):
    """A non-2xx answer from the API server (the Status message, never a request body)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def object_path(
    api_version: str, kind: str, namespace: str, name: str | None = None, subresource: str | None = None
) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    path = f"{base}/namespaces/{namespace}/{PLURALS[kind]}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to authenticate (from kopf's login helpers)."""

    server: str
    ca_pem: str | None = None
    ca_path: str | None = None
    cert_path: str | None = None
    key_path: str | None = None
    token: str | None = None
    insecure: bool = False
    # Files made here from inline kubeconfig data (a client key among them): removed once loaded.
    temp_files: tuple[str, ...] = ()
    # A token that can change (a rotated file, a new login on 401: login.ApiAuth), instead of `token`.
    auth: httpx.Auth | None = None

    @classmethod
    def from_kopf(cls, info: Any, *, auth: httpx.Auth | None = None) -> Connection:
        """kopf's ConnectionInfo: *_data fields are base64 as in a kubeconfig; cert/key need files."""
        ca_pem = base64.b64decode(info.ca_data).decode() if info.ca_data else None
        cert_path = (
            _as_file(info.certificate_data, "cert") if info.certificate_data else info.certificate_path
        )
        key_path = _as_file(info.private_key_data, "key") if info.private_key_data else info.private_key_path
        temp_files = tuple(
            str(path)
            for path, inline in ((cert_path, info.certificate_data), (key_path, info.private_key_data))
            if inline and path
        )
        return cls(
            temp_files=temp_files,
            server=info.server.rstrip("/"),
            ca_pem=ca_pem,
            ca_path=str(info.ca_path) if info.ca_path else None,
            cert_path=str(cert_path) if cert_path else None,
            key_path=str(key_path) if key_path else None,
            token=None if auth is not None else info.token,
            insecure=bool(info.insecure),
            auth=auth,
        )


def _as_file(data: str | bytes, suffix: str) -> str:
    raw = base64.b64decode(data)
    fd, path = tempfile.mkstemp(prefix="agent-operator-", suffix=f".{suffix}")  # 0600 by mkstemp
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    return path


class KubeApi:
    def __init__(self, connection: Connection, *, max_connections: int = 8, timeout: float = 30.0) -> None:
        headers = {"Accept": "application/json", "User-Agent": "agent-engine-operator"}
        if connection.token:
            headers["Authorization"] = f"Bearer {connection.token}"
        verify = self._ssl_context(connection)
        # The SSL context holds the key now; a client key must not linger in /tmp after start-up.
        for path in connection.temp_files:
            with contextlib.suppress(OSError):
                os.unlink(path)
        self._client = httpx.AsyncClient(
            base_url=connection.server,
            headers=headers,
            auth=connection.auth,
            verify=verify,
            timeout=timeout,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )
        self.requests: Counter[str] = Counter()
        # Queue here, not in httpcore's pool: each request assignment there checks every waiting request
        # and every connection (a syscall each), which dominated CPU with hundreds of concurrent reconciles.
        self._slots = asyncio.Semaphore(max_connections)
        # Long-lived watches get their own connections, so they never hold a request slot.
        self._watch_client = httpx.AsyncClient(
            base_url=connection.server,
            headers=headers,
            auth=connection.auth,
            verify=verify,
            timeout=httpx.Timeout(30.0, read=WATCH_SECONDS + 30.0),
        )

    @staticmethod
    def _ssl_context(connection: Connection) -> ssl.SSLContext | bool:
        if connection.insecure:
            return False
        ctx = ssl.create_default_context(cafile=connection.ca_path, cadata=connection.ca_pem)
        if connection.cert_path and connection.key_path:
            ctx.load_cert_chain(connection.cert_path, connection.key_path)
        return ctx

    @property
    def writes(self) -> int:
        return sum(n for verb, n in self.requests.items() if verb in WRITE_VERBS)

    async def aclose(self) -> None:
        await self._client.aclose()
        await self._watch_client.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> httpx.Response:
        self.requests[method] += 1
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": content_type} if content is not None else None
        async with self._slots:
            response = await self._client.request(
                method, path, params=params, content=content, headers=headers
            )
        if method in WRITE_VERBS:
            log.info("api write", extra={"verb": method, "path": path, "status": response.status_code})
        return response

    @staticmethod
    def _raise(response: httpx.Response) -> None:
        if response.is_success:
            return
        message = response.reason_phrase
        with contextlib.suppress(ValueError, AttributeError):
            message = response.json().get("message") or message
        raise ApiError(response.status_code, message)

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        response = await self._request("GET", path)
        if response.status_code == 404:
            return None
        self._raise(response)
        return response.json()

    async def list(self, path: str, *, label_selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else None
        response = await self._request("GET", path, params=params)
        self._raise(response)
        return list(response.json().get("items") or [])

    async def apply(self, path: str, manifest: Mapping[str, Any], *, field_manager: str) -> dict[str, Any]:
        """Server-side apply (JSON is YAML), taking ownership of conflicting fields."""
        response = await self._request(
            "PATCH",
            path,
            params={"fieldManager": field_manager, "force": "true"},
            body=manifest,
            content_type="application/apply-patch+yaml",
        )
        self._raise(response)
        return response.json()

    async def create(
        self, path: str, manifest: Mapping[str, Any], *, field_manager: str
    ) -> dict[str, Any] | None:
        """Create and return the stored object; None when one of that name already exists."""
        response = await self._request("POST", path, params={"fieldManager": field_manager}, body=manifest)
        if response.status_code == 409:
            return None
        self._raise(response)
        return response.json()

    async def update(self, path: str, manifest: Mapping[str, Any], *, field_manager: str) -> dict[str, Any]:
        """Replace the whole object (PUT): what no one renders is dropped, whoever set it."""
        response = await self._request("PUT", path, params={"fieldManager": field_manager}, body=manifest)
        self._raise(response)
        return response.json()

    async def list_metadata(self, path: str) -> tuple[list[dict[str, Any]], str]:
        """(items as PartialObjectMetadata, the list's resourceVersion)."""
        self.requests["GET"] += 1
        async with self._slots:
            response = await self._client.get(path, headers={"Accept": METADATA_LIST})
        self._raise(response)
        body = response.json()
        return list(body.get("items") or []), (body.get("metadata") or {}).get("resourceVersion", "")

    async def watch_metadata(self, path: str, *, resource_version: str) -> AsyncIterator[dict[str, Any]]:
        """Watch events ({type, object}) with PartialObjectMetadata objects, until the server ends the
        watch; an ERROR event (e.g. 410 Gone) is yielded as it comes."""
        self.requests["WATCH"] += 1
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        async with self._watch_client.stream(
            "GET", path, params=params, headers={"Accept": METADATA_WATCH}
        ) as response:
            if not response.is_success:
                await response.aread()
                self._raise(response)
            async for line in response.aiter_lines():
                if line.strip():
                    yield json.loads(line)

    async def merge_patch(self, path: str, patch: Mapping[str, Any], *, field_manager: str) -> dict[str, Any]:
        response = await self._request(
            "PATCH",
            path,
            params={"fieldManager": field_manager},
            body=patch,
            content_type="application/merge-patch+json",
        )
        self._raise(response)
        return response.json()

    async def delete(self, path: str) -> bool:
        """Delete; False when it was already gone."""
        response = await self._request("DELETE", path)
        if response.status_code == 404:
            return False
        self._raise(response)
        return True
