"""Executing tool calls over HTTP for one connector, sync (httpx.Client) and async (httpx.AsyncClient).

Per-tool request plans are built once at construction; a call only applies its arguments. Whatever is
raised or returned carries no credential: failures are re-raised as fresh httpx exceptions whose request
holds only the base URL and path template, and every error leaves with no traceback or chain into the
call's frames (whose locals hold the credential and the unredacted body: error reporters capture them).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from types import TracebackType
from typing import Any

import httpx
from pydantic import BaseModel

from agent_runtime.connectors.async_client import AioResponse, new_session, send
from agent_runtime.connectors.definitions import ToolDefinitions
from agent_runtime.connectors.errors import ConnectorError, UnknownToolError
from agent_runtime.connectors.policy import (
    CALL_BUDGET_S,
    MAX_ERROR_BODY_BYTES,
    MAX_REDIRECTS,
    MAX_RESPONSE_BYTES,
    REDIRECT_STATUSES,
    redirect_method,
    retry_wait,
    same_origin_target,
)
from agent_runtime.connectors.transport import connector_call, quiet_client_logs, tls_context
from agent_runtime.connectors.wire import PreparedRequest, RequestPlan
from agent_runtime.redaction import redactor_for

_KEPT_HEADERS = ("content-type", "retry-after")


class ToolResponse(BaseModel):
    status_code: int
    content_type: str | None = None
    body: Any = None
    truncated: bool = False


class _BudgetExceeded(httpx.TimeoutException):
    """The call's single 30-second budget ran out (between requests, chunks or retry waits)."""


def _no_cookies() -> httpx.Cookies:
    # Set-Cookie from one call must never ride along on another caller's request.
    return httpx.Cookies(
        http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    )


class _Step:
    """What the call loop does next after a response (shared by the sync and async loops)."""

    __slots__ = ("kind", "method", "url", "wait")

    def __init__(self, kind: str, *, url: str = "", method: str = "", wait: float = 0.0) -> None:
        self.kind = kind
        self.url = url
        self.method = method
        self.wait = wait


class ConnectorExecutor:
    """One per connector. Safe under concurrent calls; `close()` waits for in-flight calls.

    `env` (default os.environ) is read once here for `tls.ca_env`; credentials are read per call.
    """

    def __init__(
        self,
        definitions: ToolDefinitions,
        *,
        budget_s: float = CALL_BUDGET_S,
        env: Mapping[str, str] | None = None,
    ) -> None:
        base_url = definitions.source.base_url
        if not base_url:
            raise ConnectorError(
                f"connector {definitions.name}: source.base_url is not set; materialize the connector from "
                "its tool.yaml (which sets the base URL) before executing"
            )
        self.definitions = definitions
        self._budget_s = budget_s
        # Both paths verify with exactly this context: the connector's CA, or certifi's public roots.
        self._ssl = tls_context(
            definitions.tls, env=os.environ if env is None else env, connector=definitions.name
        )
        quiet_client_logs()
        self._plans = {
            tool.name: RequestPlan.for_tool(
                tool, base_url=base_url, auth=definitions.auth, default_headers=definitions.headers
            )
            for tool in definitions.tools
        }
        self._path_credential = definitions.auth is not None and definitions.auth.type == "path"
        self._client: httpx.Client | None = None
        # An async pool belongs to the event loop it runs on: one per loop.
        self._sessions: dict[asyncio.AbstractEventLoop, Any] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._inflight = 0
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------------

    def __enter__(self) -> ConnectorExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ConnectorExecutor:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def close(self) -> None:
        """Refuse new calls, wait for in-flight ones, then close the clients."""
        with self._idle:
            self._closed = True
            while self._inflight:
                self._idle.wait()
            client, self._client = self._client, None
            sessions, self._sessions = self._sessions, {}
        if client is not None:
            client.close()
        # Async pools can only be closed by their own loops (aclose() does that for the running one).
        for session in sessions.values():
            _abandon(session)

    async def aclose(self) -> None:
        """Like close(), awaiting in-flight calls; closes this loop's pool properly."""
        with self._lock:
            self._closed = True
        while True:
            with self._lock:
                if not self._inflight:
                    client, self._client = self._client, None
                    sessions, self._sessions = self._sessions, {}
                    break
            await asyncio.sleep(0.005)
        current = sessions.pop(asyncio.get_running_loop(), None)
        if current is not None:
            await current.close()
        for session in sessions.values():
            _abandon(session)
        if client is not None:
            client.close()

    @property
    def in_flight(self) -> int:
        """Calls currently running."""
        return self._inflight

    def _enter(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("connector executor is closed")
            self._inflight += 1

    def _leave(self) -> None:
        with self._idle:
            self._inflight -= 1
            if not self._inflight:
                self._idle.notify_all()

    def _sync_client(self) -> httpx.Client:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = httpx.Client(
                        follow_redirects=False,
                        trust_env=False,
                        verify=self._ssl,
                        cookies=_no_cookies(),
                        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
                    )
                client = self._client
        return client

    def _async_session(self) -> Any:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None:
            with self._lock:
                session = self._sessions.get(loop)
                if session is None:
                    for gone in [old for old in self._sessions if old.is_closed()]:
                        _abandon(self._sessions.pop(gone))
                    session = self._sessions[loop] = new_session(max_connections=200, ssl_context=self._ssl)
        return session

    # -- calls -----------------------------------------------------------------------------------------

    def tool_names(self) -> list[str]:
        return list(self._plans)

    def prepare(
        self, tool_name: str, arguments: Mapping[str, Any], env: Mapping[str, str] | None = None
    ) -> PreparedRequest:
        """The request a call would send (validates arguments and the credential; sends nothing)."""
        outcome = self._prepare(tool_name, arguments, env)
        if isinstance(outcome, PreparedRequest):
            return outcome
        del env  # the raised error's frame must not hold the caller's credentials
        raise outcome

    def execute(
        self, tool_name: str, arguments: Mapping[str, Any], env: Mapping[str, str] | None = None
    ) -> ToolResponse:
        """Send one call (sync); HTTP errors raise httpx.HTTPStatusError, transport failures httpx errors."""
        outcome = self._execute_sync(tool_name, arguments, env)
        if isinstance(outcome, ToolResponse):
            return outcome
        del env  # the raised error's frame must not hold the caller's credentials
        raise outcome

    async def aexecute(
        self, tool_name: str, arguments: Mapping[str, Any], env: Mapping[str, str] | None = None
    ) -> ToolResponse:
        """`execute` on the running event loop, through this loop's aiohttp pool."""
        outcome = await self._execute_async(tool_name, arguments, env)
        if isinstance(outcome, ToolResponse):
            return outcome
        del env
        raise outcome

    # The callers above raise what these return: by then the frames holding the prepared request (its
    # credential) and the provider's unredacted body have returned, and the error references none of them.

    def _prepare(
        self, tool_name: str, arguments: Mapping[str, Any], env: Mapping[str, str] | None
    ) -> PreparedRequest | Exception:
        plan = self._plans.get(tool_name)
        if plan is None:
            return UnknownToolError(
                f"unknown tool {tool_name!r} for connector {self.definitions.name}; "
                "use one of the names from tool_schemas()"
            )
        try:
            return plan.prepare(arguments, os.environ if env is None else env)
        except Exception as exc:
            return _detached(exc)

    def _execute_sync(
        self, tool_name: str, arguments: Mapping[str, Any], env: Mapping[str, str] | None
    ) -> ToolResponse | Exception:
        prepared = self._prepare(tool_name, arguments, env)
        if not isinstance(prepared, PreparedRequest):
            return prepared
        try:
            self._enter()
        except RuntimeError as exc:
            return _detached(exc)
        try:
            with connector_call():
                return self._run_sync(prepared)
        except Exception as exc:
            return _safe_error(exc, prepared)
        finally:
            self._leave()

    async def _execute_async(
        self, tool_name: str, arguments: Mapping[str, Any], env: Mapping[str, str] | None
    ) -> ToolResponse | Exception:
        prepared = self._prepare(tool_name, arguments, env)
        if not isinstance(prepared, PreparedRequest):
            return prepared
        try:
            self._enter()
        except RuntimeError as exc:
            return _detached(exc)
        try:
            with connector_call():
                return await self._run_async(prepared)
        except Exception as exc:
            return _safe_error(exc, prepared)
        finally:
            self._leave()

    def _run_sync(self, prepared: PreparedRequest) -> ToolResponse:
        client = self._sync_client()
        deadline = time.monotonic() + self._budget_s
        method, url, content, headers = prepared.method, prepared.url, prepared.content, prepared.headers
        attempt = redirects = 0
        while True:
            request = httpx.Request(
                method, url, headers=headers, content=content, extensions=_timeouts(deadline)
            )
            response = client.send(request, stream=True)
            try:
                step = self._decide(
                    response, method=method, url=url, attempt=attempt, redirects=redirects, deadline=deadline
                )
                if step.kind == "done":
                    limit = MAX_RESPONSE_BYTES + _longest(prepared.secrets)
                    data, truncated = _read_sync(response.iter_bytes(), deadline, limit)
                    return _tool_response(response, *_capped(data, truncated, prepared), method=method)
                if step.kind == "error":
                    limit = MAX_ERROR_BODY_BYTES + _longest(prepared.secrets)
                    kept = _read_error_sync(response.iter_bytes(), deadline, limit)
                    error = _status_error(prepared, response, kept, method=method, reason="")
                elif step.kind == "refused":
                    error = _status_error(prepared, response, b"", method=method, reason=_REFUSED)
            finally:
                response.close()
            if step.kind == "redirect":
                if step.method != method:
                    content, headers = None, _without_body_headers(headers)
                method, url, redirects = step.method, step.url, redirects + 1
            elif step.kind == "retry":
                time.sleep(step.wait)
                attempt += 1
            else:
                raise error

    async def _run_async(self, prepared: PreparedRequest) -> ToolResponse:
        session = self._async_session()
        deadline = time.monotonic() + self._budget_s
        method, url, content, headers = prepared.method, prepared.url, prepared.content, prepared.headers
        attempt = redirects = 0
        while True:
            response = await send(
                session,
                method=method,
                url=url,
                headers=headers,
                content=content,
                timeout_s=_remaining(deadline),
            )
            try:
                step = self._decide(
                    response, method=method, url=url, attempt=attempt, redirects=redirects, deadline=deadline
                )
                if step.kind == "done":
                    limit = MAX_RESPONSE_BYTES + _longest(prepared.secrets)
                    data, truncated = await _read_async(response.aiter_bytes(), deadline, limit)
                    return _tool_response(response, *_capped(data, truncated, prepared), method=method)
                if step.kind == "error":
                    limit = MAX_ERROR_BODY_BYTES + _longest(prepared.secrets)
                    kept = await _read_error_async(response.aiter_bytes(), deadline, limit)
                    error = _status_error(prepared, response, kept, method=method, reason="")
                elif step.kind == "refused":
                    error = _status_error(prepared, response, b"", method=method, reason=_REFUSED)
            finally:
                await response.aclose()
            if step.kind == "redirect":
                if step.method != method:
                    content, headers = None, _without_body_headers(headers)
                method, url, redirects = step.method, step.url, redirects + 1
            elif step.kind == "retry":
                await asyncio.sleep(step.wait)
                attempt += 1
            else:
                raise error

    def _decide(
        self,
        response: httpx.Response | AioResponse,
        *,
        method: str,
        url: str,
        attempt: int,
        redirects: int,
        deadline: float,
    ) -> _Step:
        """Done, error, refused redirect, redirect (where, which method) or retry (after how long)."""
        status = response.status_code
        if status < 300:
            return _DONE
        if status in REDIRECT_STATUSES:
            location = response.headers.get("location")
            if location is None:
                return _ERROR
            target = None if self._path_credential else same_origin_target(url, location)
            if target is None or redirects >= MAX_REDIRECTS:
                return _REFUSE
            return _Step("redirect", url=target, method=redirect_method(method, status))
        if status < 400:
            return _DONE
        wait = retry_wait(
            method=method, status=status, retry_after=response.headers.get("retry-after"), attempt=attempt
        )
        if wait is not None and time.monotonic() + wait < deadline:
            return _Step("retry", wait=wait)
        return _ERROR


_DONE = _Step("done")
_ERROR = _Step("error")
_REFUSE = _Step("refused")
_REFUSED = "redirect refused: the connector follows redirects only to its own origin"


def _remaining(deadline: float) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _BudgetExceeded("tool call exceeded its time budget")
    return remaining


def _timeouts(deadline: float) -> dict[str, Any]:
    remaining = _remaining(deadline)
    return {"timeout": {"connect": remaining, "read": remaining, "write": remaining, "pool": remaining}}


def _abandon(session: Any) -> None:
    """Release an aiohttp pool whose event loop is gone (or not running here): no awaiting, no I/O."""
    connector = session.connector
    session.detach()  # marks the session closed without I/O
    if connector is not None:
        with contextlib.suppress(Exception):
            connector._close()  # the synchronous part of closing; on a closed loop it only marks it closed


def _read_sync(chunks: Iterator[bytes], deadline: float, cap: int) -> tuple[bytes, bool]:
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        parts.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"".join(parts)[:cap], True
        if time.monotonic() > deadline:
            raise _BudgetExceeded("tool call exceeded its time budget while reading the response")
    return b"".join(parts), False


async def _read_async(chunks: AsyncIterator[bytes], deadline: float, cap: int) -> tuple[bytes, bool]:
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        parts.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"".join(parts)[:cap], True
        if time.monotonic() > deadline:
            raise _BudgetExceeded("tool call exceeded its time budget while reading the response")
    return b"".join(parts), False


def _read_error_sync(chunks: Iterator[bytes], deadline: float, limit: int) -> bytes:
    try:
        return _read_sync(chunks, deadline, limit)[0]
    except httpx.HTTPError:
        return b""  # the status is the error; a body that cannot be read adds nothing


async def _read_error_async(chunks: AsyncIterator[bytes], deadline: float, limit: int) -> bytes:
    try:
        return (await _read_async(chunks, deadline, limit))[0]
    except httpx.HTTPError:
        return b""


def _longest(secrets: tuple[str, ...]) -> int:
    """How many bytes past a cut can still belong to a credential's longest encoded form."""
    return redactor_for(secrets).longest


def _capped(data: bytes, truncated: bool, prepared: PreparedRequest) -> tuple[bytes, bool]:
    """A body over MAX_RESPONSE_BYTES is redacted before the cut, so no credential is left half-visible
    at its end (the Tool Pod redacts the whole result again with every secret it holds)."""
    if not truncated and len(data) <= MAX_RESPONSE_BYTES:
        return data, truncated
    return redactor_for(prepared.secrets).data(data)[:MAX_RESPONSE_BYTES], True


def _without_body_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k not in ("content-type", "content-length")}


def _tool_response(
    response: httpx.Response | AioResponse, data: bytes, truncated: bool, *, method: str
) -> ToolResponse:
    content_type = response.headers.get("content-type")
    body: Any
    if not data:
        body = None if method == "HEAD" or response.status_code == 204 else ""
    elif content_type and not truncated and _is_json(content_type):
        try:
            body = json.loads(data)
        except ValueError:
            body = _text(data, response.encoding)
    else:
        body = _text(data, response.encoding)
    return ToolResponse.model_construct(
        status_code=response.status_code, content_type=content_type, body=body, truncated=truncated
    )


def _text(data: bytes, encoding: str | None) -> str:
    """Decode with the declared charset; an unknown one (providers do send them) falls back to UTF-8."""
    try:
        return data.decode(encoding or "utf-8", errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _status_error(
    prepared: PreparedRequest,
    response: httpx.Response | AioResponse,
    kept: bytes,
    *,
    method: str,
    reason: str,
) -> httpx.HTTPStatusError:
    """A fresh error: safe request (no query, no credential), safe headers, at most 4 KB of redacted body."""
    safe_request = httpx.Request(method, prepared.safe_url)
    body = redactor_for(prepared.secrets).data(kept)[:MAX_ERROR_BODY_BYTES]
    headers = {k: response.headers[k] for k in _KEPT_HEADERS if k in response.headers}
    safe_response = httpx.Response(response.status_code, headers=headers, content=body, request=safe_request)
    message = f"{reason} ({response.status_code})" if reason else f"HTTP {response.status_code}"
    return httpx.HTTPStatusError(
        f"{message} from {method} {prepared.safe_url}", request=safe_request, response=safe_response
    )


def _safe_error(exc: Exception, prepared: PreparedRequest) -> Exception:
    """What a failed call raises: the executor's own safe status error, or a fresh transport error."""
    if isinstance(exc, httpx.RequestError):  # transport failures, and undecodable bodies too
        message = _safe_message(exc, prepared)
        if "CERTIFICATE_VERIFY_FAILED" in message:
            message += (
                "; if the provider's certificate comes from a private CA, name that CA in tool.yaml "
                "(tls.ca_file or tls.ca_env): the process's SSL_CERT_FILE is never used"
            )
        exc = type(exc)(message, request=httpx.Request(prepared.method, prepared.safe_url))
    return _detached(exc)


def _detached(exc: Exception) -> Exception:
    """The error without its traceback or chain: nothing reachable from it holds a call's locals."""
    exc.__traceback__ = None
    exc.__context__ = None
    exc.__cause__ = None
    return exc


def _safe_message(exc: httpx.RequestError, prepared: PreparedRequest) -> str:
    text = redactor_for(prepared.secrets).text(str(exc) or type(exc).__name__)
    return f"{text} ({prepared.method} {prepared.safe_url})"
