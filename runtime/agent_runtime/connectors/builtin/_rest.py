"""The HTTP client the REST-based built-ins share: one httpx pool per connector, one budget per call.

Reads are retried on 429/503 when the provider's Retry-After fits the call's budget (at most 3 times);
writes never are. A 429 that is not retried becomes `rate_limited` with `retry_after_s`, so the model can
wait and try again. Redirects are followed only to the same origin; no proxy or netrc from the environment
changes where a credential goes (`trust_env=False`). Every failure is a `BuiltinToolError` whose text comes
from the connector core's classifier: the status, a generic reason and the provider's own message with
secrets, links and control characters removed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx

from agent_runtime.connectors.classify import classify_tool_api_error
from agent_runtime.connectors.framework import BuiltinToolError
from agent_runtime.connectors.policy import (
    CALL_BUDGET_S,
    MAX_REDIRECTS,
    MAX_RESPONSE_BYTES,
    REDIRECT_STATUSES,
    RETRY_STATUSES,
    redirect_method,
    retry_after_seconds,
    same_origin_target,
)

MAX_READ_RETRIES = 3
_BACKOFF_S = (0.5, 1.0, 2.0)


def base_url_schema(default: str, description: str) -> dict[str, Any]:
    return {
        "type": "string",
        "pattern": r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        "maxLength": 2048,
        "default": default,
        "description": description,
    }


class RestClient:
    """Requests to one provider; `provider` names it in every explanation."""

    def __init__(self, *, provider: str, timeout_s: float = CALL_BUDGET_S) -> None:
        self.provider = provider
        self.timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=self.timeout_s)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.aclose()

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        data: Mapping[str, Any] | None = None,
        content: bytes | None = None,
        read: bool,
        secrets: Iterable[str] = (),
        check: Callable[[httpx.Response], None] | None = None,
    ) -> httpx.Response:
        """Send with retries for reads and same-origin redirects; raise BuiltinToolError on failure.

        `check` may raise a BuiltinToolError for a 2xx answer that is an error in the provider's own format
        (Slack's `ok: false`); it runs only on success statuses.
        """
        secret_values = [s for s in secrets if s]
        deadline = time.monotonic() + self.timeout_s
        attempt = 0
        redirects = 0
        current_url, current_method = url, method
        body_kwargs: dict[str, Any] = {}
        if json_body is not None:
            body_kwargs["content"] = json.dumps(json_body, ensure_ascii=False).encode()
            headers = {**(headers or {}), "Content-Type": "application/json"}
        elif data is not None:
            body_kwargs["data"] = dict(data)
        elif content is not None:
            body_kwargs["content"] = content
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BuiltinToolError(
                    "timeout", f"{self.provider} did not answer within {self.timeout_s:g} s"
                )
            try:
                response = await self._http().request(
                    current_method,
                    current_url,
                    headers=headers,
                    params=params,
                    timeout=remaining,
                    **body_kwargs,
                )
                await _read_capped(response)
            except httpx.HTTPError as exc:
                raise self._error(exc, secret_values) from None
            status = response.status_code
            if status in REDIRECT_STATUSES and redirects < MAX_REDIRECTS:
                target = same_origin_target(current_url, response.headers.get("location", ""))
                if target is not None:
                    redirects += 1
                    current_method = redirect_method(current_method, status)
                    if current_method == "GET":
                        body_kwargs = {}
                    current_url, params = target, None
                    continue
            if status in RETRY_STATUSES and read and attempt < MAX_READ_RETRIES:
                wait = retry_after_seconds(response.headers.get("retry-after"))
                wait = _BACKOFF_S[attempt] if wait is None else wait
                if wait < deadline - time.monotonic() - 0.5:
                    attempt += 1
                    await asyncio.sleep(wait)
                    continue
            if status >= 300:
                raise self._status_error(response, secret_values)
            if check is not None:
                check(response)
            return response

    def _error(self, exc: BaseException, secrets: list[str]) -> BuiltinToolError:
        classified = classify_tool_api_error(exc, secrets=secrets)
        explanation = classified.explanation.replace("the provider", self.provider)
        return BuiltinToolError(classified.category, explanation, status_code=classified.status_code)

    def _status_error(self, response: httpx.Response, secrets: list[str]) -> BuiltinToolError:
        error = httpx.HTTPStatusError("provider error", request=response.request, response=response)
        built = self._error(error, secrets)
        if response.status_code in RETRY_STATUSES or built.category == "rate_limited":
            retry_after = retry_after_seconds(response.headers.get("retry-after"))
            raw = response.headers.get("retry-after", "").strip()
            if raw.isdigit():
                retry_after = float(raw)  # the provider's own figure, not capped: the model should wait it
            if retry_after is not None:
                built.retry_after_s = retry_after
                built.explanation += f" (retry after {retry_after:g} s)"
        return built


async def _read_capped(response: httpx.Response) -> None:
    """Read the decoded body, at most MAX_RESPONSE_BYTES (more marks `agent_truncated`)."""
    chunks: list[bytes] = []
    size = 0
    truncated = False
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            truncated = True
            break
    await response.aclose()
    response._content = b"".join(chunks)[:MAX_RESPONSE_BYTES]
    response.extensions = {**response.extensions, "agent_truncated": truncated}


def json_of(response: httpx.Response, provider: str) -> Any:
    """The JSON body, or a server_error naming the provider when it is not JSON."""
    try:
        return response.json()
    except ValueError:
        raise BuiltinToolError("server_error", f"{provider} answered with a body that is not JSON") from None


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def host_port(url: str) -> tuple[str, int]:
    """(host, port) of a URL, the scheme's default port when none is given."""
    parsed = httpx.URL(url)
    return parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)


def clean_segment(value: str, what: str) -> str:
    """A value that goes into a URL path: refused when it could change the path (/, .., ?, #, %)."""
    if not value or value in (".", "..") or any(c in value for c in "/?#%\\") or not value.isprintable():
        raise BuiltinToolError(
            "invalid_arguments", f"{what} must be a plain identifier (no /, ?, #, % or ..)"
        )
    return value
