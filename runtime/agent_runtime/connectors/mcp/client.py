"""One MCP client for the Streamable HTTP transport (C-08): `initialize` -> `notifications/initialized` ->
`tools/list` (every page) -> `tools/call`.

Every message is a JSON-RPC POST to the server's one endpoint; the answer is either `application/json` or a
`text/event-stream` whose events carry the answer (and notifications, which are skipped). The session the
server names in `Mcp-Session-Id` is sent back on every later request, with the negotiated
`MCP-Protocol-Version`; a 404 to a request that carried a session means the server dropped it, so the client
starts a new one and sends that request once more (the server refused it before running anything).

It sends through the executor's aiohttp pool (`async_client`, one per event loop) under the executor's
rules: one budget per call (`timeout_s`, default 30 s) across handshake and answer, no redirect, no proxy or
netrc from the environment, answers capped (4 MiB per message read; a tool result passed on is one form
of it, cut to 200,000 bytes and marked `truncated`: `result.py`). Every failure is a `BuiltinToolError` in
the connector core's categories, its explanation sanitized by the core's classifier: never the token, never
the URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import ssl
import threading
from collections.abc import AsyncIterator, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from agent_runtime import __version__
from agent_runtime.connectors.async_client import AioResponse, new_session, send
from agent_runtime.connectors.classify import classify_tool_api_error
from agent_runtime.connectors.framework import INVALID_ARGUMENTS, BuiltinToolError
from agent_runtime.connectors.mcp.result import model_result
from agent_runtime.connectors.policy import CALL_BUDGET_S
from agent_runtime.connectors.transport import connector_call, quiet_client_logs
from agent_runtime.redaction import redactor_for

T = TypeVar("T")
PROTOCOL_VERSION = "2025-11-25"
# Revisions that speak Streamable HTTP through the initialize handshake (2024-11-05 is the older HTTP+SSE).
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
MAX_PAGES = 100
MAX_TOOLS = 1000
TOOL_ERROR = "tool_error"  # the tool ran and said it failed (`isError: true`): the model may act on it
_EXPLANATION_LIMIT = 2000
_ERROR_BODY_BYTES = 4096
_CLIENT_INFO = {"name": "agent-engine", "version": __version__}
_JSONRPC_CATEGORY = {
    -32700: "client_error",  # parse error: what we sent
    -32600: "client_error",  # invalid request
    -32601: "not_found",  # method not found: the server offers no tools
    -32602: INVALID_ARGUMENTS,  # invalid params: unknown tool, arguments refused, bad cursor
    -32603: "server_error",  # internal error
}


@dataclass(frozen=True)
class ServerTools:
    """What one discovery found: the server's tools as it listed them, and who it said it is."""

    tools: list[dict[str, Any]]
    server_info: dict[str, Any] = field(default_factory=dict)
    protocol_version: str = PROTOCOL_VERSION


class _SessionGone(Exception):
    """The server answered 404 to a request that carried our session: start a new one."""


class McpClient:
    """A client of one MCP server; one session, shared by concurrent calls, started on first use."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = CALL_BUDGET_S,
        ssl_context: ssl.SSLContext | None = None,
        provider: str = "the MCP server",
        max_connections: int = 100,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.provider = provider
        self._ssl = ssl_context
        self._max_connections = max_connections
        self._sessions: dict[asyncio.AbstractEventLoop, Any] = {}
        self._lock = threading.Lock()
        self._init_lock: asyncio.Lock | None = None
        self._init_loop: asyncio.AbstractEventLoop | None = None
        self._ids = 0
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] = {}
        quiet_client_logs()

    # -- the protocol -----------------------------------------------------------------------------------

    async def list_tools(self, *, token: str | None = None) -> ServerTools:
        """Every tool the server lists, page after page (`nextCursor`), within one budget; the token cut
        out of every form it takes in them (a careless server may quote it in a title or `_meta`, which
        the Connector's status and the bundle keep)."""
        outcome = await self._bounded(self._list_pages(token), token)
        if isinstance(outcome, BuiltinToolError):
            del token  # the raised error's frame must not hold the token
            raise outcome
        redactor = redactor_for([token or ""])
        return dataclasses.replace(
            outcome,
            tools=redactor.value(outcome.tools),
            server_info=redactor.value(outcome.server_info),
        )

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        token: str | None = None,
        declares_output: bool = False,
    ) -> dict[str, Any]:
        """`tools/call` with the server's own tool name. A result with `isError: true` raises `tool_error`;
        otherwise the one form the model is sent (`mcp/result.py`: `structuredContent` when the tool
        `declares_output` schema, else `content`), `truncated`, at most 200,000 bytes."""
        outcome = await self._bounded(
            self._request("tools/call", {"name": name, "arguments": dict(arguments)}, token=token), token
        )
        if isinstance(outcome, dict) and outcome.get("isError") is True:
            text = _content_text(outcome.get("content"))
            outcome = BuiltinToolError(
                TOOL_ERROR,
                _bounded(f"the MCP tool {name} failed: {text or 'no detail given'}", [token or ""]),
            )
        if isinstance(outcome, BuiltinToolError):
            del token, arguments
            raise outcome
        # Redacted before the cut: a token the server echoes must not be left half-visible at the end.
        return model_result(redactor_for([token or ""]).value(outcome), declares_output=declares_output)

    async def _list_pages(self, token: str | None) -> ServerTools:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            params = {"cursor": cursor} if cursor is not None else {}
            result = await self._request("tools/list", params, token=token)
            page = result.get("tools")
            if not isinstance(page, list):
                raise self._protocol_error("its tools/list answer has no tools list")
            tools += [t for t in page if isinstance(t, dict)]
            if len(tools) > MAX_TOOLS:
                raise self._protocol_error(f"it lists more than {MAX_TOOLS} tools")
            following = result.get("nextCursor")
            if following is None or following == "":
                return ServerTools(
                    tools=tools,
                    server_info=dict(self.server_info),
                    protocol_version=self.protocol_version or PROTOCOL_VERSION,
                )
            if not isinstance(following, str) or following in seen:
                raise self._protocol_error("its tools/list pages repeat a cursor")
            seen.add(following)
            cursor = following
        raise self._protocol_error(f"its tools/list runs over {MAX_PAGES} pages")

    async def _bounded(self, work: Coroutine[Any, Any, T], token: str | None) -> T | BuiltinToolError:
        """`work` within the call's budget, or its failure as a fresh BuiltinToolError (returned, so it is
        raised outside any handler: no `__context__` leads back to frames that hold the token)."""
        secrets = [token or ""]
        with connector_call():
            try:
                async with asyncio.timeout(self.timeout_s):
                    return await work
            except TimeoutError:
                return self._timeout()
            except BuiltinToolError as exc:
                return _scrubbed(exc, secrets)
            except httpx.HTTPError as exc:  # the transport's failures, as the executor classifies them
                return self._transport_error(exc, secrets)

    async def close_session(self, *, token: str | None = None) -> None:
        """Tell the server the session is over (DELETE); a failure is no one's concern."""
        session_id, self.session_id = self.session_id, None
        if session_id is None:
            return
        headers = {SESSION_HEADER: session_id, **_auth(token)}
        with connector_call(), contextlib.suppress(Exception):
            async with asyncio.timeout(min(self.timeout_s, 5.0)):
                response = await send(
                    self._pool(), method="DELETE", url=self.url, headers=headers, content=None, timeout_s=5.0
                )
                await response.aclose()

    async def aclose(self) -> None:
        """Close this loop's pool (others are abandoned without I/O)."""
        with self._lock:
            sessions, self._sessions = self._sessions, {}
        current = sessions.pop(asyncio.get_running_loop(), None)
        if current is not None:
            await current.close()
        for session in sessions.values():
            with contextlib.suppress(Exception):
                session.detach()

    # -- the session ------------------------------------------------------------------------------------

    async def _request(self, method: str, params: Mapping[str, Any], *, token: str | None) -> dict[str, Any]:
        """One request in the session, starting it first when needed, again once if the server lost it."""
        for attempt in (1, 2):
            session = await self._ensure_session(token)
            try:
                return await self._rpc(method, params, token=token, session=session)
            except _SessionGone:
                if attempt == 2:
                    raise self._protocol_error("it dropped the new session at once") from None
                self._forget_session(session)
        raise AssertionError("unreachable")

    def _init_guard(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._init_lock is None or self._init_loop is not loop:
            self._init_lock, self._init_loop = asyncio.Lock(), loop
        return self._init_lock

    async def _ensure_session(self, token: str | None) -> str | None:
        if self.protocol_version is not None:
            return self.session_id
        async with self._init_guard():
            if self.protocol_version is not None:
                return self.session_id
            self.session_id = None
            params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": _CLIENT_INFO}
            result, session_id = await self._post({"method": "initialize", "params": params}, token=token)
            version = result.get("protocolVersion")
            if version not in SUPPORTED_VERSIONS:
                raise BuiltinToolError(
                    "client_error",
                    f"{self.provider} speaks MCP protocol version {str(version)[:20]!r}; this client speaks "
                    f"{', '.join(SUPPORTED_VERSIONS)} over Streamable HTTP",
                )
            info = result.get("serverInfo")
            self.server_info = (
                {k: str(v)[:100] for k, v in info.items() if k in ("name", "version", "title")}
                if isinstance(info, dict)
                else {}
            )
            self.session_id = session_id
            self.protocol_version = version
            try:
                await self._post(
                    {"method": "notifications/initialized"}, token=token, session=session_id, notify=True
                )
            except BaseException:
                self.protocol_version = None
                raise
            return session_id

    def _forget_session(self, session: str | None) -> None:
        if self.session_id == session:
            self.protocol_version = None
            self.session_id = None

    async def _rpc(
        self, method: str, params: Mapping[str, Any], *, token: str | None, session: str | None
    ) -> dict[str, Any]:
        result, _ = await self._post({"method": method, "params": dict(params)}, token=token, session=session)
        return result

    # -- the wire ---------------------------------------------------------------------------------------

    def _pool(self) -> Any:
        loop = asyncio.get_running_loop()
        pool = self._sessions.get(loop)
        if pool is None:
            with self._lock:
                pool = self._sessions.get(loop)
                if pool is None:
                    pool = self._sessions[loop] = new_session(
                        max_connections=self._max_connections, ssl_context=self._ssl
                    )
        return pool

    async def _post(
        self,
        message: dict[str, Any],
        *,
        token: str | None,
        session: str | None = None,
        notify: bool = False,
    ) -> tuple[dict[str, Any], str | None]:
        """POST one JSON-RPC message; (the answer's result, the session the server named)."""
        request_id: int | None = None
        if not notify:
            self._ids += 1
            request_id = self._ids
        body = {"jsonrpc": "2.0", **({"id": request_id} if request_id is not None else {}), **message}
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **_auth(token),
        }
        if session:
            headers[SESSION_HEADER] = session
        if self.protocol_version and message["method"] != "initialize":
            headers[VERSION_HEADER] = self.protocol_version
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        response = await send(
            self._pool(),
            method="POST",
            url=self.url,
            headers=headers,
            content=content,
            timeout_s=self.timeout_s,
        )
        try:
            status = response.status_code
            if status == 404 and session:
                raise _SessionGone()
            if status >= 300:
                raise await self._status_error(response, [token or ""])
            named = response.headers.get(SESSION_HEADER) or session
            if notify:
                return {}, named
            kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind == "text/event-stream":
                answer = await self._from_events(response, request_id)
            elif kind == "application/json":
                answer = _find_answer(
                    _json(await _read(response, MAX_MESSAGE_BYTES, self.provider)), request_id
                )
            else:
                raise self._protocol_error(
                    f"it answered {kind or 'no content type'}, not JSON or an event stream"
                )
            if answer is None:
                raise self._protocol_error(f"its answer holds no response to request {request_id}")
            return self._result_of(answer), named
        finally:
            await response.aclose()

    async def _from_events(self, response: AioResponse, request_id: int | None) -> dict[str, Any] | None:
        """Read server-sent events until the one answering `request_id` (skipping notifications)."""
        async for data in _sse_data(response, self.provider):
            with contextlib.suppress(ValueError):
                answer = _find_answer(json.loads(data), request_id)
                if answer is not None:
                    return answer
        return None

    def _result_of(self, answer: dict[str, Any]) -> dict[str, Any]:
        error = answer.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            category = _JSONRPC_CATEGORY.get(code if isinstance(code, int) else 0, "server_error")
            message = str(error.get("message") or "no message")
            raise BuiltinToolError(category, f"{self.provider} answered error {code}: {message}")
        result = answer.get("result")
        if not isinstance(result, dict):
            raise self._protocol_error("its answer has neither a result object nor an error")
        return result

    async def _status_error(self, response: AioResponse, secrets: list[str]) -> BuiltinToolError:
        body, _ = await _read_capped(response, _ERROR_BODY_BYTES)
        request = httpx.Request("POST", "http://mcp.invalid/")  # never the real URL: it may hold a secret
        built = httpx.Response(response.status_code, content=body, request=request)
        classified = classify_tool_api_error(
            httpx.HTTPStatusError("MCP server error", request=request, response=built), secrets=secrets
        )
        explanation = classified.explanation.replace("the provider", self.provider)
        return BuiltinToolError(classified.category, explanation, status_code=classified.status_code)

    def _transport_error(self, exc: httpx.HTTPError, secrets: list[str]) -> BuiltinToolError:
        classified = classify_tool_api_error(exc, secrets=secrets)
        return BuiltinToolError(
            classified.category, classified.explanation.replace("the provider", self.provider)
        )

    def _protocol_error(self, what: str) -> BuiltinToolError:
        return BuiltinToolError("server_error", f"{self.provider} broke the MCP protocol: {what}")

    def _timeout(self) -> BuiltinToolError:
        return BuiltinToolError("timeout", f"{self.provider} did not answer within {self.timeout_s:g} s")


def _auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _find_answer(payload: Any, request_id: int | None) -> dict[str, Any] | None:
    """The JSON-RPC response to `request_id` in a message or a batch; requests and notifications skipped."""
    for item in payload if isinstance(payload, list) else [payload]:
        if isinstance(item, dict) and "method" not in item and item.get("id") == request_id:
            return item
    return None


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        raise BuiltinToolError(
            "server_error", "the MCP server answered with a body that is not JSON"
        ) from None


async def _read_capped(response: AioResponse, cap: int) -> tuple[bytes, bool]:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"".join(parts)[:cap], True
    return b"".join(parts), False


async def _read(response: AioResponse, cap: int, provider: str) -> bytes:
    body, over = await _read_capped(response, cap)
    if over:
        raise BuiltinToolError("server_error", f"{provider} sent a message over {cap} bytes")
    return body


async def _sse_data(response: AioResponse, provider: str) -> AsyncIterator[str]:
    """The `data` of each server-sent event (multi-line data joined with newlines), bounded in size."""
    buffer = b""
    data: list[str] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_MESSAGE_BYTES:
            raise BuiltinToolError(
                "server_error", f"{provider} sent an event stream over {MAX_MESSAGE_BYTES} bytes"
            )
        buffer += chunk
        while True:
            cut = buffer.find(b"\n")
            if cut < 0:
                break
            line, buffer = buffer[:cut].rstrip(b"\r"), buffer[cut + 1 :]
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
                continue
            text = line.decode("utf-8", errors="replace")
            if text.startswith(":"):
                continue  # a comment (keep-alive)
            name, _, value = text.partition(":")
            if name == "data":
                data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def _content_text(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    texts = [
        str(block.get("text", ""))
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    ]
    return " ".join(" ".join(texts).split())


def _bounded(text: str, secrets: list[str]) -> str:
    text = redactor_for(secrets).text(text)
    text = "".join(c for c in text if c.isprintable() or c == " ")
    return text if len(text) <= _EXPLANATION_LIMIT else text[: _EXPLANATION_LIMIT - 1] + "…"


def _scrubbed(exc: BuiltinToolError, secrets: list[str]) -> BuiltinToolError:
    """The same failure with the token removed from its explanation and no frames of ours behind it."""
    return BuiltinToolError(
        exc.category,
        _bounded(exc.explanation, secrets),
        status_code=exc.status_code,
        retry_after_s=exc.retry_after_s,
    )
