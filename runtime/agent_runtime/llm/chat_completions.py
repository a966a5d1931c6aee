"""An OpenAI-compatible chat-completions client: the model call behind Tool Pod `/invoke_llm`.

It sends through the connector core's aiohttp pool with httpx's error contract (`connectors/async_client.py`):
the Tool Pod makes many model calls at once, and httpx's own async pool loses most of its throughput under
concurrency.

The API key lives only in the Tool Pod's environment (X-04), so the client holds the NAME of the variable
and reads the value per call. No exception, log line or repr ever carries the key or a response body:
providers echo credentials in error bodies, so only status codes and short vetted tokens are reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from agent_runtime.connectors.async_client import AioResponse, new_session, send
from agent_runtime.contract import LLM_API_KEY_ENV_ENV, LLM_BASE_URL_ENV, LLM_MODEL_ENV
from agent_runtime.llm.errors import LLMError, LLMErrorCategory
from agent_runtime.llm.messages import (
    RESERVED_OPTIONS,
    Message,
    ResponseShapeError,
    StreamCollector,
    ai_message_from_completion,
    canonical_tool_names,
    chat_completion_request,
    offered_tool_names,
)
from agent_runtime.redaction import redact

_log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# An error body is read only to pick out its error type/code; a token this plain cannot carry prose.
_ERROR_BODY_CAP = 64 * 1024
_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_DONE = "[DONE]"
_MAX_CONNECTIONS = 256


class ChatCompletionsModel:
    """One model on one OpenAI-compatible endpoint. Reuses one httpx.AsyncClient per event loop."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        default_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._base_url = _checked_base_url(base_url)
        self._url = f"{self._base_url}/chat/completions"
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model: must be a non-empty string")
        if api_key_env is not None and not _ENV_NAME.match(api_key_env):
            # Never echo the value: a key pasted here by mistake would end up in a log.
            raise ValueError(
                "api_key_env: must be the NAME of the environment variable that holds the API key "
                "(letters, digits and underscores), not the key itself"
            )
        if not timeout_s > 0:
            raise ValueError("timeout_s: must be positive")
        if max_response_bytes < 1:
            raise ValueError("max_response_bytes: must be positive")
        options = dict(default_options or {})
        clash = sorted(RESERVED_OPTIONS & options.keys())
        if clash:
            raise ValueError(f"default_options: {', '.join(clash)} are set by the client, not options")
        self._model = model
        self._api_key_env = api_key_env
        self._timeout_s = float(timeout_s)
        self._max_response_bytes = max_response_bytes
        self._default_options = options
        self._client: Any = None  # an aiohttp.ClientSession, opened on first use
        self._client_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        default_options: Mapping[str, Any] | None = None,
    ) -> ChatCompletionsModel:
        """The model the platform variables name; the key variable is optional (keyless local servers)."""
        values = {}
        for name in (LLM_BASE_URL_ENV, LLM_MODEL_ENV):
            value = env.get(name, "").strip()
            if not value:
                raise ValueError(f"{name} is not set: it names the chat-completions endpoint and model")
            values[name] = value
        return cls(
            base_url=values[LLM_BASE_URL_ENV],
            model=values[LLM_MODEL_ENV],
            api_key_env=env.get(LLM_API_KEY_ENV_ENV, "").strip() or None,
            timeout_s=timeout_s,
            max_response_bytes=max_response_bytes,
            default_options=default_options,
        )

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def model(self) -> str:
        return self._model

    @property
    def api_key_env(self) -> str | None:
        return self._api_key_env

    def __repr__(self) -> str:
        return (
            f"ChatCompletionsModel(base_url={self._base_url!r}, model={self._model!r}, "
            f"api_key_env={self._api_key_env!r}, timeout_s={self._timeout_s!r})"
        )

    async def ainvoke(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        stream: bool = False,
        **options: Any,
    ) -> Message:
        """Call the model once and return the final AI message (the same shape streamed or not)."""
        body = self._body(messages, tools=tools, stream=stream, options=options)
        names = offered_tool_names(tools)
        key = self._api_key()
        final: Message | None = None
        try:
            async with asyncio.timeout(self._timeout_s):
                async with contextlib.aclosing(self._events(body, key=key, stream=stream)) as events:
                    async for event in events:
                        final = event
        except TimeoutError:
            raise self._timeout_error() from None
        if final is None or final.get("type") != "ai":  # _events ends with the message or raises
            raise _bad_response("the call ended without a final message")
        return canonical_tool_names(final, names)

    async def astream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        """Stream the call: `llm_chunk` events as they arrive, then the final AI message (`type: "ai"`)."""
        body = self._body(messages, tools=tools, stream=True, options=options)
        names = offered_tool_names(tools)
        key = self._api_key()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        # The budget covers the whole call, but a timeout scope must not span our yields (the consumer's
        # code would be cancelled), so each step gets what is left of it.
        async with contextlib.aclosing(self._events(body, key=key, stream=True)) as events:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise self._timeout_error()
                try:
                    event = await asyncio.wait_for(anext(events), remaining)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise self._timeout_error() from None
                yield canonical_tool_names(event, names)

    async def aclose(self) -> None:
        """Close the pooled connections; a later call opens a new client."""
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.close()
        self._client_loop = None

    async def __aenter__(self) -> ChatCompletionsModel:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # internals ------------------------------------------------------------------------------------------

    def _body(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None,
        stream: bool,
        options: Mapping[str, Any],
    ) -> dict[str, Any]:
        return chat_completion_request(
            model=self._model,
            messages=messages,
            tools=tools,
            stream=stream,
            options={**self._default_options, **options},
        )

    def _api_key(self) -> str | None:
        """The key, read now: it exists only in the Tool Pod's environment."""
        if self._api_key_env is None:
            return None
        key = os.environ.get(self._api_key_env, "").strip()
        if not key:
            raise LLMError(
                LLMErrorCategory.CREDENTIAL_MISSING,
                f"the environment variable {self._api_key_env} meant to hold the API key is unset or empty",
            )
        if not (key.isascii() and key.isprintable()) or " " in key:
            raise LLMError(
                LLMErrorCategory.CREDENTIAL_MISSING,
                f"the environment variable {self._api_key_env} does not hold a usable API key "
                "(spaces, control or non-ASCII characters)",
            )
        return key

    def _http(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.closed or self._client_loop is not loop:
            # A pool's connections belong to the loop that opened them. No netrc or proxy variables:
            # they would change where the key goes.
            self._client = new_session(max_connections=_MAX_CONNECTIONS)
            self._client_loop = loop
        return self._client

    def _timeout_error(self) -> LLMError:
        return LLMError(
            LLMErrorCategory.TIMEOUT, f"the model API did not finish within {self._timeout_s:g} s"
        )

    async def _events(self, body: dict[str, Any], *, key: str | None, stream: bool) -> AsyncIterator[Message]:
        """`llm_chunk` events (streaming only), then the final AI message; failures as LLMError."""
        headers = {
            "Accept": "text/event-stream" if stream else "application/json",
            "Content-Type": "application/json",
        }
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        started = time.monotonic()
        reading = False
        chunks = 0
        try:
            response = await send(
                self._http(),
                method="POST",
                url=self._url,
                headers=headers,
                content=json.dumps(body).encode(),
                timeout_s=self._timeout_s,
            )
            async with contextlib.aclosing(response):
                reading = True
                if response.status_code != 200:
                    raise await _status_error(response, key=key, api_key_env=self._api_key_env)
                content_type = response.headers.get("content-type", "")
                if not stream or "text/event-stream" not in content_type:
                    # A server may ignore `stream: true` and answer whole; the message is the same.
                    yield _completion(await _read_capped(response, self._max_response_bytes), key=key)
                    return
                collector = StreamCollector()
                done = False
                async with contextlib.aclosing(_sse_data(response, self._max_response_bytes)) as events:
                    async for data in events:
                        if data == _DONE:
                            done = True
                            break
                        yield _chunk_event(collector, data, key=key)
                        chunks += 1
                if not done:
                    raise LLMError(
                        LLMErrorCategory.STREAM_DROPPED,
                        f"the stream ended without [DONE] after {_chunks(chunks)}",
                        status_code=200,
                    )
                try:
                    yield collector.message()
                except ResponseShapeError as exc:
                    raise _bad_response(f"the stream does not add up to a completion ({exc})") from None
        except httpx.TimeoutException:
            raise self._timeout_error() from None
        except httpx.TransportError as exc:
            if reading and stream:
                raise LLMError(
                    LLMErrorCategory.STREAM_DROPPED,
                    f"the stream broke after {_chunks(chunks)} ({type(exc).__name__})",
                    status_code=200,
                ) from None
            where = "while reading the response" if reading else "before a response"
            raise LLMError(
                LLMErrorCategory.CONNECTION,
                f"the connection to the model API failed {where} ({type(exc).__name__})",
            ) from None
        except httpx.HTTPError as exc:  # decoding errors and the like: the bytes were not what they claimed
            raise _bad_response(f"the response could not be decoded ({type(exc).__name__})") from None
        finally:
            _log.debug(
                "llm call model=%s stream=%s chunks=%d duration_ms=%.1f",
                self._model,
                stream,
                chunks,
                (time.monotonic() - started) * 1000,
            )


def _checked_base_url(base_url: str) -> str:
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError):
        raise ValueError("base_url: not a URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError("base_url: must be an http(s) URL with a host, such as https://api.example/v1")
    if url.userinfo:
        raise ValueError("base_url: must not carry credentials; name the key's variable in api_key_env")
    if url.query or url.fragment:
        raise ValueError("base_url: must not have a query or fragment")
    return str(url).rstrip("/")


async def _read_capped(response: AioResponse, cap: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise _bad_response(f"the response is larger than {cap} bytes")
    parts, size = [], 0
    async for piece in response.aiter_bytes():
        size += len(piece)
        if size > cap:
            raise _bad_response(f"the response is larger than {cap} bytes")
        parts.append(piece)
    return b"".join(parts)


async def _sse_data(response: AioResponse, cap: int) -> AsyncIterator[str]:
    """The `data` of each server-sent event, with a cap on the whole stream."""
    buffer, size, data = b"", 0, []
    async for piece in response.aiter_bytes():
        size += len(piece)
        if size > cap:
            raise _bad_response(f"the stream is larger than {cap} bytes")
        buffer += piece
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r")
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
                continue
            if line.startswith(b":"):  # a comment (keep-alive)
                continue
            field, _, value = line.partition(b":")
            if field == b"data":
                try:
                    data.append(value.removeprefix(b" ").decode("utf-8"))
                except UnicodeDecodeError:
                    raise _bad_response("a stream event is not UTF-8") from None
            elif field not in (b"event", b"id", b"retry"):
                raise _bad_response("the event stream holds a line that is not a server-sent event")
    if data:  # a last event without its blank line
        yield "\n".join(data)


def _chunk_event(collector: StreamCollector, data: str, *, key: str | None) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except ValueError:
        raise _bad_response("a stream event is not JSON") from None
    if isinstance(chunk, Mapping) and "error" in chunk and "choices" not in chunk:
        hint = _error_hint(chunk, key=key)
        raise LLMError(
            LLMErrorCategory.SERVER_ERROR, f"the stream carried an error event{hint}", status_code=200
        )
    try:
        return collector.add(chunk)
    except ResponseShapeError as exc:
        raise _bad_response(f"a stream chunk is not a completion chunk ({exc})") from None


def _completion(raw: bytes, *, key: str | None) -> Message:
    try:
        body = json.loads(raw)
    except ValueError:  # the exception holds the document; `from None` keeps it out of tracebacks
        raise _bad_response("the response is not JSON") from None
    if isinstance(body, Mapping) and "error" in body and "choices" not in body:
        raise _bad_response(f"the response is an error object, not a completion{_error_hint(body, key=key)}")
    try:
        return ai_message_from_completion(body)
    except ResponseShapeError as exc:
        raise _bad_response(f"the response is not a chat completion ({exc})") from None


async def _status_error(response: AioResponse, *, key: str | None, api_key_env: str | None) -> LLMError:
    code = response.status_code
    try:
        body = json.loads(await _read_capped(response, _ERROR_BODY_CAP))
    except (LLMError, ValueError, httpx.HTTPError):
        body = None
    hint = _error_hint(body, key=key)
    try:
        phrase = http.HTTPStatus(code).phrase  # never the server's own reason phrase
    except ValueError:
        phrase = "status"
    said = f"the model API answered {code} {phrase}{hint}"
    retry_after = _retry_after(response.headers.get("retry-after"))
    if code in (401, 403):
        where = f"the key in {api_key_env}" if api_key_env else "that the endpoint needs no key"
        return LLMError(LLMErrorCategory.AUTH, f"{said}; check {where}", status_code=code)
    if code == 429:
        wait = f"; retry after {retry_after:g} s" if retry_after is not None else ""
        return LLMError(
            LLMErrorCategory.RATE_LIMITED, f"{said}{wait}", status_code=code, retry_after_s=retry_after
        )
    if code >= 500:
        return LLMError(LLMErrorCategory.SERVER_ERROR, said, status_code=code, retry_after_s=retry_after)
    if code >= 400:
        return LLMError(LLMErrorCategory.CLIENT_ERROR, said, status_code=code)
    why = "redirects are not followed; configure the final URL" if 300 <= code < 400 else "expected 200"
    return LLMError(LLMErrorCategory.BAD_RESPONSE, f"{said}; {why}", status_code=code)


def _error_hint(body: Any, *, key: str | None) -> str:
    """` (type=..., code=...)` from an OpenAI error object, only for plain tokens; never its message."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return ""
    tokens = [
        f"{name}={error[name]}"
        for name in ("type", "code")
        if isinstance(error.get(name), str) and _SAFE_TOKEN.match(error[name])
    ]
    # A server echoing the key as a "code" would otherwise get it through.
    return redact(f" ({', '.join(tokens)})", [key] if key else []) if tokens else ""


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < 86_400 else None


def _chunks(count: int) -> str:
    return f"{count} chunk" if count == 1 else f"{count} chunks"


def _bad_response(explanation: str) -> LLMError:
    return LLMError(LLMErrorCategory.BAD_RESPONSE, explanation)
