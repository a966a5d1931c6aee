"""`KnowledgeClient`: the Memory server's knowledge routes over HTTP (the `knowledge` connector, the SDK).

It presents the Agent's runtime token (read again when its mounted file changes; a 401 during a rotation
is sent again with the other token). Errors never hold the token or a document's text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from agent_runtime.contract import TOKEN_ENV, TOKEN_FILE_ENV
from agent_runtime.memory.knowledge_wire import (
    ChunkView,
    IngestAnswer,
    IngestBody,
    KnowledgeSearchBody,
    SearchAnswer,
    SourcesAnswer,
    SourceView,
    check_chunk_id,
)
from agent_runtime.token_file import RotatingToken, TokenLike, as_rotating

MEMORY_URL_ENV = "AGENTIC_MEMORY_URL"
DEFAULT_TIMEOUT_S = 120.0  # an ingest embeds the whole document before it answers


class KnowledgeUnavailable(RuntimeError):
    """The Memory server could not be reached, or is not configured for this process."""


class KnowledgeRequestError(RuntimeError):
    """The Memory server refused the request (4xx); `error` its code, `detail` what to fix."""

    def __init__(self, status: int, error: str, detail: Any) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail


def token_from_env(env: Mapping[str, str]) -> RotatingToken:
    """The runtime token from its mounted file (RUNTIME_TOKEN_FILE) or RUNTIME_TOKEN."""
    path = env.get(TOKEN_FILE_ENV, "").strip()
    if path:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise KnowledgeUnavailable(
                f"{TOKEN_FILE_ENV}={path}: cannot read it ({type(exc).__name__})"
            ) from None
        if value:
            return RotatingToken(value, path=path, setting=TOKEN_FILE_ENV)
    value = env.get(TOKEN_ENV, "").strip()
    if not value:
        raise KnowledgeUnavailable(
            f"no runtime token: set {TOKEN_FILE_ENV} (the mounted Secret) or {TOKEN_ENV}"
        )
    return RotatingToken(value, setting=TOKEN_ENV)


class KnowledgeClient:
    """One Agent's knowledge base. Create one per process and `await aclose()` at the end."""

    def __init__(self, base_url: str, *, token: TokenLike, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise KnowledgeUnavailable(
                f"{MEMORY_URL_ENV} must be an http(s) URL, e.g. http://agent-memory:8081"
            )
        self._base = base_url.rstrip("/")
        self._token = as_rotating(token)
        self._http = httpx.AsyncClient(timeout=timeout_s)

    def __repr__(self) -> str:
        return f"KnowledgeClient({self._base!r})"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KnowledgeClient:
        env = os.environ if env is None else env
        url = env.get(MEMORY_URL_ENV, "").strip()
        if not url:
            raise KnowledgeUnavailable(
                f"{MEMORY_URL_ENV} is not set: the knowledge base lives in the Agent's Memory server; "
                "enable it (spec.components.memory.enabled: true)"
            )
        return cls(url, token=token_from_env(env))

    async def _call(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Any:
        token = self._token.current()
        try:
            response = await self._send(method, path, token, json=json, params=params)
            for other in self._token.alternatives(token) if response.status_code == 401 else ():
                response = await self._send(method, path, other, json=json, params=params)
                if response.status_code != 401:
                    break
        except httpx.HTTPError as exc:
            raise KnowledgeUnavailable(f"the Memory server is unreachable ({type(exc).__name__})") from None
        if response.status_code >= 500:
            try:
                error = response.json().get("error", "error")
            except ValueError:
                error = "error"
            raise KnowledgeUnavailable(f"the Memory server answered {response.status_code} ({error})")
        if response.status_code == 401:
            raise KnowledgeRequestError(401, "unauthorized", "the runtime token was refused")
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            raise KnowledgeRequestError(response.status_code, body.get("error", "error"), body.get("detail"))
        return body

    async def _send(self, method: str, path: str, token: str, *, json: Any, params: Any) -> httpx.Response:
        return await self._http.request(
            method, self._base + path, json=json, params=params, headers={"authorization": f"Bearer {token}"}
        )

    async def ingest(self, body: IngestBody) -> IngestAnswer:
        data = await self._call("POST", "/knowledge/documents", json=body.model_dump(mode="json"))
        return IngestAnswer.model_validate(data)

    async def search(self, body: KnowledgeSearchBody) -> list[ChunkView]:
        data = await self._call(
            "POST", "/knowledge/search", json=body.model_dump(mode="json", exclude_none=True)
        )
        return SearchAnswer.model_validate(data).results

    async def get(self, chunk_id: str) -> ChunkView | None:
        try:
            # Checked here, not only by the server: the id goes into the path, and a model's `../` or `?`
            # must never turn this call into another route of the Memory server.
            checked = check_chunk_id(chunk_id)
        except ValueError as exc:
            raise KnowledgeRequestError(
                400, "invalid_request", [{"field": "id", "problem": str(exc)}]
            ) from None
        try:
            data = await self._call("GET", f"/knowledge/chunks/{checked}")
        except KnowledgeRequestError as exc:
            if exc.status == 404:
                return None
            raise
        return ChunkView.model_validate(data)

    async def all_sources(self) -> list[SourceView]:
        """Every document, page by page."""
        found: list[SourceView] = []
        while True:
            page = await self.sources(limit=1000, offset=len(found))
            found += page
            if len(page) < 1000:
                return found

    async def sources(self, *, limit: int = 1000, offset: int = 0) -> list[SourceView]:
        data = await self._call("GET", "/knowledge/documents", params={"limit": limit, "offset": offset})
        return SourcesAnswer.model_validate(data).sources

    async def forget(self, source: str) -> int:
        data = await self._call("DELETE", "/knowledge/documents", params={"source": source})
        return int(data.get("removed", 0))

    async def aclose(self) -> None:
        await self._http.aclose()
