"""The executor's async HTTP path: aiohttp's connection pool under httpx's contract.

httpx's own async pool (httpcore on anyio) loses most of its throughput under concurrency: on this
project's 2-core machine ~100-150 calls/s with 32 concurrent callers where aiohttp sustains well over
a thousand (encode/httpx#3215), and httpx's request/response models add ~0.4 ms per call on top. The Tool
Pod needs 1,500+ calls/s, so `aexecute` sends with aiohttp and keeps httpx's contract where it is
visible: failures raise the httpx exception httpx itself would raise, and error responses become
`httpx.HTTPStatusError`s built by the executor.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

try:  # shipped with the runtime extra (and the operator's kopf); compile-only installs never need it
    import aiohttp
    import aiohttp.http_exceptions
    import yarl
except ImportError:  # pragma: no cover - exercised only in an install without the runtime extra
    aiohttp = None  # type: ignore[assignment]

_CHUNK = 65536


def new_session(*, max_connections: int, ssl_context: ssl.SSLContext | None = None) -> Any:
    """One pool per event loop. No cookies, no environment-derived behaviour (netrc, proxies).

    The executor passes its connector's `ssl_context`: aiohttp's default (None here) would also trust
    whatever SSL_CERT_FILE names.
    """
    if aiohttp is None:  # pragma: no cover
        raise RuntimeError("aexecute needs aiohttp; install agent-engine[runtime]")
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=max_connections, ttl_dns_cache=60, ssl=ssl_context or True),
        cookie_jar=aiohttp.DummyCookieJar(),  # never carry one caller's cookies into another's call
        trust_env=False,  # netrc could attach a credential nobody configured; the sync client matches
        # Only what the executor put in the request goes out (the sync path sends the same bytes): no
        # Accept-Encoding, no Content-Type: application/octet-stream on a bodiless PUT.
        skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
        request_class=exact_request_class(),
    )


@functools.cache
def exact_request_class() -> Any:
    """aiohttp's ClientRequest without the Content-Length it adds to a request with no body (a DELETE):
    the executor sets Content-Length itself (wire.py) exactly as httpx sends it."""

    class ExactRequest(aiohttp.ClientRequest):  # type: ignore[misc,name-defined]
        def update_body_from_data(self, body: Any, *args: Any, **kwargs: Any) -> None:
            if body is None:
                self._body = None
                return
            super().update_body_from_data(body, *args, **kwargs)

    return ExactRequest


class AioResponse:
    """The parts of a response the executor reads, over an aiohttp response (body decoded by aiohttp)."""

    __slots__ = ("_raw", "headers", "status_code")

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.status_code: int = raw.status
        self.headers: Mapping[str, str] = raw.headers  # case-insensitive, like httpx.Headers

    @property
    def encoding(self) -> str | None:
        return self._raw.charset

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        read = self._raw.content.read
        try:
            while True:
                chunk = await read(_CHUNK)
                if not chunk:
                    return
                yield chunk
        except Exception as exc:
            raise to_httpx_error(exc, reading=True) from None

    async def aclose(self) -> None:
        # A body read to its end returns the connection to the pool; anything cut short (capped,
        # endless, failed) must not leave unread bytes on a pooled connection.
        if self._raw.content.at_eof():
            self._raw.release()
        else:
            self._raw.close()


async def send(
    session: Any,
    *,
    method: str,
    url: str,
    headers: Mapping[str, str],
    content: bytes | None,
    timeout_s: float,
) -> AioResponse:
    """Send and return once headers arrived; every phase is bounded by what remains of the budget.

    With tracing on, the call is a client span (agent_runtime.tracing) and carries its traceparent.
    """
    # Imported here: tracing needs OpenTelemetry (the runtime extra), and compile-only installs (the operator
    # image, the CLI) import this module through the connector core without ever sending.
    from agent_runtime import tracing

    # The URL is already percent-encoded exactly as intended; letting yarl re-normalize it would turn an
    # encoded dot segment ("%2E%2E") back into ".." and resolve it into another path.
    target = yarl.URL(url, encoded=True)
    span, owned = None, False
    if tracing.enabled():
        host, port = target.host or "", target.port or 0
        span, owned = tracing.start_client_span(method, host=host, port=port, path=target.path)
        headers = dict(headers)
        tracing.inject_span(span, headers)
    timeout = aiohttp.ClientTimeout(
        total=None, connect=timeout_s, sock_connect=timeout_s, sock_read=timeout_s
    )
    try:
        raw = await session.request(
            method, target, headers=headers, data=content, allow_redirects=False, timeout=timeout
        )
    except BaseException as exc:
        if span is not None:
            tracing.end_client_span(span, owned=owned, error=exc)
        if isinstance(exc, Exception):
            raise to_httpx_error(exc, reading=False) from None
        raise
    if span is not None:
        tracing.end_client_span(span, owned=owned, status=raw.status)
    return AioResponse(raw)


def to_httpx_error(exc: BaseException, *, reading: bool) -> BaseException:
    """The httpx exception for an aiohttp failure; its message names the failure, never the URL."""
    if isinstance(exc, httpx.HTTPError | asyncio.CancelledError):
        return exc
    if aiohttp is not None:
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return httpx.ConnectTimeout("timed out connecting to the provider")
        if isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
            return httpx.ReadTimeout("timed out waiting for the provider")
        if isinstance(exc, aiohttp.InvalidURL):
            return httpx.UnsupportedProtocol("the request URL is not a valid http(s) URL")
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            return httpx.RemoteProtocolError("the provider closed the connection without a response")
        if isinstance(exc, aiohttp.ClientPayloadError):
            if isinstance(exc.__cause__, aiohttp.http_exceptions.ContentEncodingError):
                return httpx.DecodingError("the provider's body does not match its Content-Encoding")
            return httpx.RemoteProtocolError("the provider sent a malformed or incomplete body")
        if isinstance(exc, aiohttp.ClientConnectorError):
            reason = exc.os_error.strerror or type(exc.os_error).__name__
            return httpx.ConnectError(f"cannot connect to {exc.host}:{exc.port}: {reason}")
        if isinstance(exc, aiohttp.ClientResponseError):
            return httpx.RemoteProtocolError(f"invalid response from the provider ({exc.status})")
    if isinstance(exc, TimeoutError):
        return httpx.ReadTimeout("timed out waiting for the provider")
    kind = httpx.ReadError if reading else httpx.ConnectError
    return kind(f"{'reading from' if reading else 'sending to'} the provider failed ({type(exc).__name__})")
