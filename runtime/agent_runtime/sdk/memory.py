"""`MemoryClient`: agent code's access to its Agent's Memory server (AGENTIC_MEMORY_URL, runtime token).

    memory = MemoryClient.from_env()
    await memory.write("prefers window seats", namespace="preferences")
    hits = await memory.search("where does the user like to sit?", namespace="preferences", top_k=3)
    await memory.append_episode("asked for a refund", role="user")
    recent = await memory.recent_episodes(limit=10)
    await memory.put_category("Billing", id="billing")
    best = await memory.categorize("my invoice is wrong")

`org_id`, `user_id` and (for episodes) `session_id` default to the running execution's, so each user's
memories stay theirs without agent code passing them. Every call has an async form; `*_sync` twins serve
synchronous code (the LangGraph store). A refused request raises `MemoryRequestError` naming the field and
the problem; an unreachable server or a 5xx raises `MemoryUnavailable`. Neither carries the token.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import httpx

from agent_runtime.contract import TOKEN_ENV, TOKEN_FILE_ENV
from agent_runtime.memory.scope import STATEMENT_HEADER
from agent_runtime.memory.wire import (
    Kind,
    NamespacesAnswer,
    RecordsAnswer,
    RecordView,
    SummaryAnswer,
    WriteAnswer,
)
from agent_runtime.sdk.context import RequestContext, current_context
from agent_runtime.token_file import RotatingToken, TokenLike, TokenSettingError, as_rotating, grace_from_env
from agent_runtime.tracing import httpx_event_hooks

MEMORY_URL_ENV = "AGENTIC_MEMORY_URL"
DEFAULT_TIMEOUT_S = 10.0
EPISODES_NAMESPACE = "episodes"
CATEGORIES_NAMESPACE = "categories"


class MemoryEngineProtocol(Protocol):
    """What agent code needs from memory (the seed's MemoryEngineProtocol); `MemoryClient` speaks it over
    HTTP, and a test may pass anything else that does."""

    async def write(self, content: str, **options: Any) -> RecordView: ...

    async def search(self, query: str | None = None, **options: Any) -> list[RecordView]: ...

    async def get(self, record_id: str, *, namespace: str, kind: Kind | str = ...) -> RecordView | None: ...

    async def delete(self, record_id: str, *, namespace: str, kind: Kind | str = ...) -> None: ...

    async def append_episode(self, content: str, *, role: str | None = None) -> RecordView: ...

    async def recent_episodes(self, *, limit: int = 20) -> list[RecordView]: ...

    async def categorize(self, text: str, *, top_k: int = 3) -> list[RecordView]: ...

    async def aclose(self) -> None: ...


class MemoryConfigError(ValueError):
    """The Memory server's address or the token is missing; the message names the variable."""


class MemoryRequestError(RuntimeError):
    """The Memory server refused the request (4xx): `status`, `error` code and `detail` from its answer."""

    def __init__(self, status: int, error: str, detail: Any) -> None:
        if isinstance(detail, list):
            text = "; ".join(
                f"{item.get('field')}: {item.get('problem')}" for item in detail if isinstance(item, dict)
            )
        else:
            text = str(detail)
        super().__init__(f"memory {error} ({status}): {text}")
        self.status = status
        self.error = error
        self.detail = detail


class MemoryUnavailable(RuntimeError):
    """The Memory server could not be reached or failed (5xx)."""


def _token_from_env(env: Mapping[str, str]) -> str:
    file_name = env.get(TOKEN_FILE_ENV, "").strip()
    if file_name:
        try:
            token = Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise MemoryConfigError(
                f"{TOKEN_FILE_ENV}={file_name}: cannot read it ({type(exc).__name__})"
            ) from None
        if token:
            return token
    token = env.get(TOKEN_ENV, "").strip()
    if not token:
        raise MemoryConfigError(f"no runtime token: set {TOKEN_FILE_ENV} (the mounted Secret) or {TOKEN_ENV}")
    return token


def _rotating_token_from_env(env: Mapping[str, str]) -> RotatingToken:
    """The runtime token, read again when its mounted file changes (see agent_runtime/token_file.py)."""
    token = _token_from_env(env)
    try:
        grace_s = grace_from_env(env)
    except TokenSettingError as exc:
        raise MemoryConfigError(str(exc)) from None
    file_name = env.get(TOKEN_FILE_ENV, "").strip()
    return RotatingToken(token, path=file_name or None, setting=TOKEN_FILE_ENV, grace_s=grace_s)


def _context() -> RequestContext | None:
    """The running execution's context, or None in code that runs outside one (a script, a test)."""
    try:
        return current_context()
    except RuntimeError:
        return None


def _bearer(token: str, statement: str | None = None) -> dict[str, str]:
    headers = {"authorization": f"Bearer {token}"}
    if statement:
        headers[STATEMENT_HEADER] = statement
    return headers


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class MemoryClient:
    """One Agent's Memory server over HTTP. Create one per process and `await aclose()` at the end."""

    def __init__(
        self,
        base_url: str,
        *,
        token: TokenLike,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        statement: str | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise MemoryConfigError(f"{MEMORY_URL_ENV} must be an http(s) URL, e.g. http://agent-memory:8081")
        self._base = base_url.rstrip("/")
        # Sent per request: the token follows its mounted file, and a 401 during a rotation is retried.
        self._token = as_rotating(token)
        self._timeout = timeout_s
        # An explicit OE statement (an export outside an execution); inside a run, the run's own is sent.
        self._statement = statement
        self._async: httpx.AsyncClient | None = None
        self._sync: httpx.Client | None = None

    def __repr__(self) -> str:
        return f"MemoryClient({self._base!r})"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MemoryClient:
        """From AGENTIC_MEMORY_URL (rendered when the Agent enables memory) and the runtime token."""
        env = os.environ if env is None else env
        url = env.get(MEMORY_URL_ENV, "").strip()
        if not url:
            raise MemoryConfigError(
                f"{MEMORY_URL_ENV} is not set: enable memory on the Agent (spec.components.memory.enabled: "
                "true) or set it to the Memory server's URL for a local run"
            )
        return cls(url, token=_rotating_token_from_env(env))

    # transport

    def _statement_now(self) -> str | None:
        """The OE's memory statement: the running execution's (the Memory server takes the user and org
        from it alone, issue 27), else the one this client was made with."""
        context = _context()
        if context is not None and context.memory_credential:
            return context.memory_credential
        return self._statement

    def _answer(self, response: httpx.Response) -> Any:
        if response.status_code == 204:
            return None
        if response.status_code >= 500:
            raise MemoryUnavailable(
                f"the Memory server answered {response.status_code}: {response.text[:200]}"
            )
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            if response.status_code == 401:
                raise MemoryRequestError(401, "unauthorized", "the runtime token was refused")
            raise MemoryRequestError(response.status_code, body.get("error", "error"), body.get("detail"))
        return body

    async def _call(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Any:
        if self._async is None:
            hooks = httpx_event_hooks(asynchronous=True)
            self._async = httpx.AsyncClient(timeout=self._timeout, event_hooks=hooks)
        token = self._token.current()
        try:
            response = await self._async.request(
                method,
                self._base + path,
                json=json,
                params=params,
                headers=_bearer(token, self._statement_now()),
            )
            # The server's guard refused the token before any handler ran: again with the other tokens.
            for other in self._token.alternatives(token) if response.status_code == 401 else ():
                response = await self._async.request(
                    method,
                    self._base + path,
                    json=json,
                    params=params,
                    headers=_bearer(other, self._statement_now()),
                )
                if response.status_code != 401:
                    break
        except httpx.HTTPError as exc:
            raise MemoryUnavailable(f"the Memory server is unreachable ({type(exc).__name__})") from None
        return self._answer(response)

    def _call_sync(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Any:
        if self._sync is None:
            hooks = httpx_event_hooks(asynchronous=False)
            self._sync = httpx.Client(timeout=self._timeout, event_hooks=hooks)
        token = self._token.current()
        try:
            response = self._sync.request(
                method,
                self._base + path,
                json=json,
                params=params,
                headers=_bearer(token, self._statement_now()),
            )
            for other in self._token.alternatives(token) if response.status_code == 401 else ():
                response = self._sync.request(
                    method,
                    self._base + path,
                    json=json,
                    params=params,
                    headers=_bearer(other, self._statement_now()),
                )
                if response.status_code != 401:
                    break
        except httpx.HTTPError as exc:
            raise MemoryUnavailable(f"the Memory server is unreachable ({type(exc).__name__})") from None
        return self._answer(response)

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()
            self._async = None
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    # scope

    @staticmethod
    def _scope(org_id: str | None, user_id: str | None) -> dict[str, str]:
        """The execution's org and user unless given: one user's memories are not another's."""
        context = _context()
        if org_id is None:
            org_id = (context.org_id if context is not None else None) or ""
        if user_id is None:
            user_id = (context.user_id if context is not None else None) or ""
        return {"org_id": org_id, "user_id": user_id}

    @staticmethod
    def _session(session_id: str | None) -> str:
        if session_id is not None:
            return session_id
        context = _context()
        if context is None or not context.session_id:
            raise ValueError("session_id: no execution is running here; pass session_id=")
        return context.session_id

    # requests, built once for both forms

    def write_request(
        self,
        content: str,
        *,
        namespace: str,
        kind: Kind | str = Kind.SEMANTIC,
        record_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        org_id: str | None = None,
        user_id: str | None = None,
        **fields: Any,
    ) -> tuple[str, dict[str, Any]]:
        body = {
            "namespace": namespace,
            **self._scope(org_id, user_id),
            "id": record_id,
            "content": content,
            "metadata": dict(metadata or {}),
            **fields,
        }
        return f"/memory/{Kind(kind).value}/records", _drop_none(body)

    def search_request(
        self,
        query: str | None = None,
        *,
        namespace: str | None = None,
        namespace_prefix: str | None = None,
        kind: Kind | str = Kind.SEMANTIC,
        top_k: int = 10,
        offset: int = 0,
        filter: Mapping[str, Any] | None = None,  # the API's own word
        min_score: float | None = None,
        org_id: str | None = None,
        user_id: str | None = None,
        **fields: Any,
    ) -> tuple[str, dict[str, Any]]:
        body = {
            "namespace": namespace,
            "namespace_prefix": namespace_prefix,
            **self._scope(org_id, user_id),
            "query": query,
            "top_k": top_k,
            "offset": offset,
            "filter": dict(filter) if filter is not None else None,
            "min_score": min_score,
            **fields,
        }
        return f"/memory/{Kind(kind).value}/search", _drop_none(body)

    # semantic (and any kind)

    async def write(self, content: str, **options: Any) -> RecordView:
        """Remember `content` (`namespace=` required; `kind`, `record_id`, `metadata`, `embedding`...)."""
        path, body = self.write_request(content, **options)
        return WriteAnswer.model_validate(await self._call("POST", path, json=body)).record

    def write_sync(self, content: str, **options: Any) -> RecordView:
        path, body = self.write_request(content, **options)
        return WriteAnswer.model_validate(self._call_sync("POST", path, json=body)).record

    async def search(self, query: str | None = None, **options: Any) -> list[RecordView]:
        """Records by meaning, best first with `score` (or by `filter` alone, newest first, with no query)."""
        path, body = self.search_request(query, **options)
        return RecordsAnswer.model_validate(await self._call("POST", path, json=body)).results

    def search_sync(self, query: str | None = None, **options: Any) -> list[RecordView]:
        path, body = self.search_request(query, **options)
        return RecordsAnswer.model_validate(self._call_sync("POST", path, json=body)).results

    def _record_params(self, namespace: str, org_id: str | None, user_id: str | None) -> dict[str, str]:
        return {"namespace": namespace, **self._scope(org_id, user_id)}

    async def get(
        self,
        record_id: str,
        *,
        namespace: str,
        kind: Kind | str = Kind.SEMANTIC,
        org_id: str | None = None,
        user_id: str | None = None,
    ) -> RecordView | None:
        """One record, or None when this scope holds no such record."""
        try:
            answer = await self._call(
                "GET",
                f"/memory/{Kind(kind).value}/records/{record_id}",
                params=self._record_params(namespace, org_id, user_id),
            )
        except MemoryRequestError as exc:
            if exc.error == "record_not_found":
                return None
            raise
        return RecordView.model_validate(answer)

    def get_sync(
        self, record_id: str, *, namespace: str, kind: Kind | str = Kind.SEMANTIC, **scope: str | None
    ) -> RecordView | None:
        try:
            answer = self._call_sync(
                "GET",
                f"/memory/{Kind(kind).value}/records/{record_id}",
                params=self._record_params(namespace, scope.get("org_id"), scope.get("user_id")),
            )
        except MemoryRequestError as exc:
            if exc.error == "record_not_found":
                return None
            raise
        return RecordView.model_validate(answer)

    async def delete(
        self,
        record_id: str,
        *,
        namespace: str,
        kind: Kind | str = Kind.SEMANTIC,
        cascade: bool = False,
        org_id: str | None = None,
        user_id: str | None = None,
    ) -> None:
        """Forget a record (no error when it is already gone); `cascade` takes a category's subtree too."""
        params = self._record_params(namespace, org_id, user_id)
        if cascade:
            params["cascade"] = "true"
        await self._call("DELETE", f"/memory/{Kind(kind).value}/records/{record_id}", params=params)

    def delete_sync(
        self, record_id: str, *, namespace: str, kind: Kind | str = Kind.SEMANTIC, **scope: str | None
    ) -> None:
        params = self._record_params(namespace, scope.get("org_id"), scope.get("user_id"))
        self._call_sync("DELETE", f"/memory/{Kind(kind).value}/records/{record_id}", params=params)

    def _namespaces_body(
        self, prefix: str | None, limit: int, offset: int, scope: Mapping[str, str | None]
    ) -> dict:
        body = {**self._scope(scope.get("org_id"), scope.get("user_id")), "prefix": prefix}
        return _drop_none({**body, "limit": limit, "offset": offset})

    async def namespaces(
        self,
        *,
        kind: Kind | str = Kind.SEMANTIC,
        prefix: str | None = None,
        limit: int = 100,
        offset: int = 0,
        **scope: str | None,
    ) -> list[str]:
        """Namespaces that hold records of `kind` (in this org and user), optionally below `prefix`."""
        body = self._namespaces_body(prefix, limit, offset, scope)
        answer = await self._call("POST", f"/memory/{Kind(kind).value}/namespaces", json=body)
        return NamespacesAnswer.model_validate(answer).namespaces

    def namespaces_sync(
        self,
        *,
        kind: Kind | str = Kind.SEMANTIC,
        prefix: str | None = None,
        limit: int = 100,
        offset: int = 0,
        **scope: str | None,
    ) -> list[str]:
        body = self._namespaces_body(prefix, limit, offset, scope)
        answer = self._call_sync("POST", f"/memory/{Kind(kind).value}/namespaces", json=body)
        return NamespacesAnswer.model_validate(answer).namespaces

    # episodic

    async def append_episode(
        self,
        content: str,
        *,
        role: str | None = None,
        session_id: str | None = None,
        namespace: str = EPISODES_NAMESPACE,
        metadata: Mapping[str, Any] | None = None,
        occurred_at: float | None = None,
    ) -> RecordView:
        """Record an event of the session (the execution's, unless given) at `occurred_at` (default now)."""
        return await self.write(
            content,
            namespace=namespace,
            kind=Kind.EPISODIC,
            metadata=metadata,
            session_id=self._session(session_id),
            role=role,
            occurred_at=occurred_at,
        )

    async def recent_episodes(
        self,
        *,
        limit: int = 20,
        session_id: str | None = None,
        namespace: str = EPISODES_NAMESPACE,
        since: float | None = None,
        until: float | None = None,
    ) -> list[RecordView]:
        """The session's latest `limit` events in the window, oldest first (ready to put in a prompt)."""
        body = _drop_none(
            {
                "namespace": namespace,
                **self._scope(None, None),
                "session_id": self._session(session_id),
                "since": since,
                "until": until,
                "order": "desc",
                "limit": limit,
            }
        )
        answer = await self._call("POST", "/memory/episodic/list", json=body)
        return RecordsAnswer.model_validate(answer).results[::-1]

    async def summarize_episodes(
        self,
        *,
        session_id: str | None = None,
        namespace: str = EPISODES_NAMESPACE,
        since: float | None = None,
        until: float | None = None,
        max_highlights: int = 5,
    ) -> SummaryAnswer:
        """An extractive summary of the session's events in the window."""
        body = _drop_none(
            {
                "namespace": namespace,
                **self._scope(None, None),
                "session_id": self._session(session_id),
                "since": since,
                "until": until,
                "max_highlights": max_highlights,
            }
        )
        return SummaryAnswer.model_validate(await self._call("POST", "/memory/episodic/summarize", json=body))

    # taxonomic

    async def put_category(
        self,
        label: str,
        *,
        category_id: str | None = None,
        parent_id: str | None = None,
        namespace: str = CATEGORIES_NAMESPACE,
        metadata: Mapping[str, Any] | None = None,
    ) -> RecordView:
        """Create or replace a category (its `label` is what `categorize` compares texts with)."""
        return await self.write(
            label,
            namespace=namespace,
            kind=Kind.TAXONOMIC,
            record_id=category_id,
            parent_id=parent_id,
            metadata=metadata,
        )

    async def move_category(
        self, category_id: str, *, parent_id: str | None, namespace: str = CATEGORIES_NAMESPACE
    ) -> RecordView:
        """Put a category under another (None: make it a root); a move below itself is refused."""
        body = {"namespace": namespace, **self._scope(None, None), "parent_id": parent_id}
        answer = await self._call("POST", f"/memory/taxonomic/records/{category_id}/move", json=body)
        return RecordView.model_validate(answer)

    async def categories(
        self,
        *,
        root_id: str | None = None,
        max_depth: int | None = None,
        namespace: str = CATEGORIES_NAMESPACE,
    ) -> list[RecordView]:
        """The tree below `root_id` (or all of it), depth first, each with `depth` and `path`."""
        body = _drop_none(
            {"namespace": namespace, **self._scope(None, None), "root_id": root_id, "max_depth": max_depth}
        )
        return RecordsAnswer.model_validate(
            await self._call("POST", "/memory/taxonomic/subtree", json=body)
        ).results

    async def categorize(
        self, text: str, *, top_k: int = 3, namespace: str = CATEGORIES_NAMESPACE
    ) -> list[RecordView]:
        """The categories closest in meaning to `text`, best first, each with its `path` from the root."""
        return await self.search(text, namespace=namespace, kind=Kind.TAXONOMIC, top_k=top_k)


_shared: MemoryClient | None = None


def shared_memory_client() -> MemoryClient:
    """The process's one `MemoryClient` from the environment, made on first use: what `app.memory` is."""
    global _shared
    if _shared is None:
        _shared = MemoryClient.from_env()
    return _shared
