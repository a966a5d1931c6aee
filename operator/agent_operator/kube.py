"""A small async Kubernetes REST client on aiohttp that counts every request it makes.

kopf does the watching; this client does the operator's own reads and writes, so each one is visible in
`requests` (by verb) and, for writes, logged. aiohttp (kopf's own client) rather than httpx: with hundreds
of concurrent reconciles httpx's pool, anyio and URL models spent most of the operator's CPU per request.
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
from typing import Any, Protocol

import aiohttp
import yarl

log = logging.getLogger("agent_operator.kube")

PLURALS = {
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "ServiceAccount": "serviceaccounts",
    "Service": "services",
    "Deployment": "deployments",
    "ReplicaSet": "replicasets",
    "NetworkPolicy": "networkpolicies",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "Event": "events",
    "Agent": "agents",
    "Connector": "connectors",
}
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Metadata only (names, labels, resourceVersion): a watch of every Secret never carries a Secret's data.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
LIST_PAGE = 100  # items per LIST request: a page of 100 Deployments is about a MB parsed
WATCH_SECONDS = 290  # the server ends each watch after this; the client's read timeout is a little longer
# What a request can fail with before any answer: no connection, TLS, a reset or dropped connection, a
# timeout (aiohttp's own timeouts are ClientErrors and TimeoutErrors; TimeoutError is an OSError).
_TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)


class TokenSource(Protocol):
    """A bearer token that can change (login.ApiAuth): sent with each request, renewed after a 401."""

    async def header(self) -> str:
        """The Authorization header's value for the next request."""
        ...

    async def renew(self, refused: str) -> None:
        """Log in again after the API server refused `refused` (a value `header` gave) with a 401."""
        ...


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


class ApiUnreachable(ApiError):
    """No answer at all: the API server could not be reached, or the connection failed mid-request.

    `status` is 0. The message names the failure's type and the API path, never a credential (aiohttp's
    own exceptions can carry the request's headers, so none is chained).
    """

    def __init__(self, message: str) -> None:
        super().__init__(0, message)

    @classmethod
    def of(cls, exc: BaseException, method: str, path: str) -> ApiUnreachable:
        reason = type(exc).__name__
        # An OS error's text is the system's (e.g. "Connection refused"): no URL, no header.
        if isinstance(exc, OSError) and exc.strerror:
            reason += f" ({exc.strerror})"
        return cls(f"the API server could not be reached: {reason} on {method} {path}")


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
    auth: TokenSource | None = None

    @classmethod
    def from_kopf(cls, info: Any, *, auth: TokenSource | None = None) -> Connection:
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
        self._server = connection.server.rstrip("/")
        self._headers = {"Accept": "application/json", "User-Agent": "agent-engine-operator"}
        if connection.token:
            self._headers["Authorization"] = f"Bearer {connection.token}"
        self._auth = connection.auth
        self._ssl = self._ssl_context(connection)
        # The SSL context holds the key now; a client key must not linger in /tmp after start-up.
        for path in connection.temp_files:
            with contextlib.suppress(OSError):
                os.unlink(path)
        self._max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout, sock_connect=timeout, sock_read=timeout
        )
        # The server ends a watch after WATCH_SECONDS; a read that waits longer than that is a lost one.
        self._watch_timeout = aiohttp.ClientTimeout(
            total=None, connect=30.0, sock_connect=30.0, sock_read=WATCH_SECONDS + 30.0
        )
        self.requests: Counter[str] = Counter()
        # Queue here, not in the connector's pool: a request holds a slot only while it is on the wire.
        self._slots = asyncio.Semaphore(max_connections)
        # Made in the running loop on first use (this object may be built before the loop runs).
        self._http: aiohttp.ClientSession | None = None
        # Long-lived watches get their own session and connections, so they never hold a request slot.
        self._watch_http: aiohttp.ClientSession | None = None
        self._closed = False

    @staticmethod
    def _ssl_context(connection: Connection) -> ssl.SSLContext | bool:
        if connection.insecure:
            return False  # aiohttp: no certificate verification
        ctx = ssl.create_default_context(cafile=connection.ca_path, cadata=connection.ca_pem)
        if connection.cert_path and connection.key_path:
            ctx.load_cert_chain(connection.cert_path, connection.key_path)
        return ctx

    def _session(self, *, watch: bool = False) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("the operator's API client is closed")
        if watch:
            if self._watch_http is None:
                self._watch_http = self._new_session(limit=0, timeout=self._watch_timeout)
            return self._watch_http
        if self._http is None:
            self._http = self._new_session(limit=self._max_connections, timeout=self._timeout)
        return self._http

    def _new_session(self, *, limit: int, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            # Keep-alive connections, at most `limit` of them (0: as many as there are watches).
            connector=aiohttp.TCPConnector(limit=limit, limit_per_host=0, ssl=self._ssl),
            headers=self._headers,
            timeout=timeout,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,  # no proxy or netrc from the environment, as kopf's own connection
        )

    @property
    def writes(self) -> int:
        return sum(n for verb, n in self.requests.items() if verb in WRITE_VERBS)

    async def aclose(self) -> None:
        self._closed = True
        sessions = (self._http, self._watch_http)
        self._http = self._watch_http = None
        for session in sessions:
            if session is not None:
                await session.close()

    def _url(self, path: str) -> yarl.URL:
        # Paths are built here from Kubernetes names (nothing to encode); yarl then skips re-encoding them.
        return yarl.URL(self._server + path, encoded=True)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str | None = None,
    ) -> tuple[int, str, bytes]:
        """(status, reason, body) of one request; on a 401 with a renewable token, once more after a new
        login (a refused request did nothing)."""
        self.requests[method] += 1
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers: dict[str, str] = {}
        if data is not None:
            headers["Content-Type"] = content_type
        if accept is not None:
            headers["Accept"] = accept
        session = self._session()
        url = self._url(path)
        auth = self._auth
        if auth is not None:
            headers["Authorization"] = await auth.header()
        answer = await self._send(session, method, url, path, params, data, headers)
        if answer[0] == 401 and auth is not None:
            # Outside the slot: a login may run a program, and other requests need not wait for it.
            refused = headers["Authorization"]
            await auth.renew(refused)
            headers["Authorization"] = await auth.header()
            if headers["Authorization"] != refused:
                answer = await self._send(session, method, url, path, params, data, headers)
        if method in WRITE_VERBS:
            log.info("api write", extra={"verb": method, "path": path, "status": answer[0]})
        return answer

    async def _send(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: yarl.URL,
        path: str,
        params: Mapping[str, str] | None,
        data: bytes | None,
        headers: Mapping[str, str],
    ) -> tuple[int, str, bytes]:
        try:
            async with (
                self._slots,
                session.request(
                    method, url, params=params, data=data, headers=headers, allow_redirects=False
                ) as response,
            ):
                # Read whole: the connection goes back to the pool before the slot is given up.
                return response.status, response.reason or "", await response.read()
        except _TRANSPORT_ERRORS as exc:
            raise ApiUnreachable.of(exc, method, path) from None

    @staticmethod
    def _raise(status: int, reason: str, body: bytes) -> None:
        if 200 <= status < 300:
            return
        message = reason
        with contextlib.suppress(ValueError, AttributeError):
            message = json.loads(body).get("message") or message
        raise ApiError(status, message)

    @classmethod
    def _json(cls, answer: tuple[int, str, bytes]) -> Any:
        cls._raise(*answer)
        return json.loads(answer[2])

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        answer = await self._request("GET", path)
        if answer[0] == 404:
            return None
        return self._json(answer)

    async def list(self, path: str, *, label_selector: str | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        async for page, _ in self.pages(path, label_selector=label_selector):
            items.extend(page)
        return items

    async def pages(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        metadata_only: bool = False,
        limit: int = LIST_PAGE,
    ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        """A LIST in pages of `limit` items (so a large collection is never one body in memory): each
        page's items and the list's resourceVersion (the last page's is the one to watch from)."""
        params = {"limit": str(limit)}
        if label_selector:
            params["labelSelector"] = label_selector
        while True:
            answer = await self._request(
                "GET", path, params=params, accept=METADATA_LIST if metadata_only else None
            )
            body = self._json(answer)
            meta = body.get("metadata") or {}
            yield list(body.get("items") or []), meta.get("resourceVersion", "")
            if not meta.get("continue"):
                return
            params = {**params, "continue": meta["continue"]}

    async def apply(self, path: str, manifest: Mapping[str, Any], *, field_manager: str) -> dict[str, Any]:
        """Server-side apply (JSON is YAML), taking ownership of conflicting fields."""
        answer = await self._request(
            "PATCH",
            path,
            params={"fieldManager": field_manager, "force": "true"},
            body=manifest,
            content_type="application/apply-patch+yaml",
        )
        return self._json(answer)

    async def create(
        self, path: str, manifest: Mapping[str, Any], *, field_manager: str
    ) -> dict[str, Any] | None:
        """Create and return the stored object; None when one of that name already exists."""
        answer = await self._request("POST", path, params={"fieldManager": field_manager}, body=manifest)
        if answer[0] == 409:
            return None
        return self._json(answer)

    async def update(self, path: str, manifest: Mapping[str, Any], *, field_manager: str) -> dict[str, Any]:
        """Replace the whole object (PUT): what no one renders is dropped, whoever set it."""
        answer = await self._request("PUT", path, params={"fieldManager": field_manager}, body=manifest)
        return self._json(answer)

    async def list_metadata(self, path: str) -> tuple[list[dict[str, Any]], str]:
        """(items as PartialObjectMetadata, the list's resourceVersion)."""
        items: list[dict[str, Any]] = []
        version = ""
        async for page, page_version in self.pages(path, metadata_only=True):
            items.extend(page)
            version = page_version
        return items, version

    async def watch_metadata(self, path: str, *, resource_version: str) -> AsyncIterator[dict[str, Any]]:
        """Watch events ({type, object}) with PartialObjectMetadata objects (see `watch`)."""
        async for event in self.watch(path, resource_version=resource_version, metadata_only=True):
            yield event

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        label_selector: str | None = None,
        metadata_only: bool = False,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events ({type, object}) until the server ends the watch; an ERROR event (e.g. 410 Gone) is
        yielded as it comes."""
        self.requests["WATCH"] += 1
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        if label_selector:
            params["labelSelector"] = label_selector
        try:
            response = await self._open_watch(path, params, accept=METADATA_WATCH if metadata_only else None)
            async with response:
                if not 200 <= response.status < 300:
                    self._raise(response.status, response.reason or "", await response.read())
                # Lines split here, not by aiohttp's readline: that refuses a line over 128 KiB, and one
                # object's metadata (its annotations) may be longer.
                pending = b""
                async for chunk in response.content.iter_any():
                    pending += chunk
                    start = 0
                    end = pending.find(b"\n")
                    while end >= 0:
                        line = pending[start:end]
                        if line.strip():
                            yield json.loads(line)
                        start = end + 1
                        end = pending.find(b"\n", start)
                    pending = pending[start:]
                if pending.strip():
                    yield json.loads(pending)
        except _TRANSPORT_ERRORS as exc:
            raise ApiUnreachable.of(exc, "WATCH", path) from None

    async def _open_watch(
        self, path: str, params: Mapping[str, str], *, accept: str | None
    ) -> aiohttp.ClientResponse:
        """The watch's response, headers read; after a 401, once more with a renewed token."""
        session = self._session(watch=True)
        url = self._url(path)
        headers = {"Accept": accept or "application/json"}
        auth = self._auth
        if auth is not None:
            headers["Authorization"] = await auth.header()
        response = await session.get(url, params=params, headers=headers, allow_redirects=False)
        if response.status == 401 and auth is not None:
            await response.read()  # the Status message, should the 401 stand; the connection is free
            refused = headers["Authorization"]
            await auth.renew(refused)
            headers["Authorization"] = await auth.header()
            if headers["Authorization"] != refused:
                response = await session.get(url, params=params, headers=headers, allow_redirects=False)
        return response

    async def merge_patch(self, path: str, patch: Mapping[str, Any], *, field_manager: str) -> dict[str, Any]:
        answer = await self._request(
            "PATCH",
            path,
            params={"fieldManager": field_manager},
            body=patch,
            content_type="application/merge-patch+json",
        )
        return self._json(answer)

    async def delete(self, path: str) -> bool:
        """Delete; False when it was already gone."""
        answer = await self._request("DELETE", path)
        if answer[0] == 404:
            return False
        self._raise(*answer)
        return True
