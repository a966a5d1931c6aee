"""The AER's client of the Orchestration Engine: `/tool/execute`, `/tool/result`, `/executor/callback`.

Every failure to get a valid answer is a `PlatformFailure` (LG-08): a transport error, a timeout, a
non-200 status or a body that is not the contract's. Its message names the route and the kind of failure,
never the token or the OE's URL. All three calls are resent, with backoff for a bounded time, when the
connection to the OE is lost or refused (an OE restarting): the OE treats a repeated report (OE-11, OE-13)
and a repeated `/tool/execute` of one (execution, step) idempotently, so a resend never runs a tool twice
(it joins the first attempt, is answered from the replay cache, or re-drives a claim whose OE died, which
the Tool Pod answers from its memory of the call). A `/tool/execute` that timed out is not resent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Protocol

import aiohttp
from pydantic import BaseModel, ValidationError

from agent_runtime import tracing
from agent_runtime.contract import OE_URL_ENV
from agent_runtime.protocol import (
    OE_CALLBACK_PATH,
    OE_GRAPH_STREAM_PATH,
    OE_TOOL_EXECUTE_PATH,
    OE_TOOL_RESULT_PATH,
    ExecutorCallback,
    GraphStreamChunk,
    ToolExecuteAnswer,
    ToolExecuteRequest,
    ToolResultRequest,
    validation_problems,
)
from agent_runtime.sdk.errors import PlatformFailure
from agent_runtime.token_file import TokenLike, as_rotating

logger = logging.getLogger(__name__)

# An answer to /tool/execute waits for the tool or the model to finish in the Tool Pod.
DEFAULT_CALL_TIMEOUT_S = 600.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
# The callback is the run's only outcome: worth half a minute of retries (B-15).
DEFAULT_CALLBACK_BUDGET_S = 30.0
# A local tool's result and a call's answer hold up the turn; the budget covers an OE restart, not an outage.
DEFAULT_RESULT_BUDGET_S = 30.0
DEFAULT_EXECUTE_BUDGET_S = 30.0
_ACK_ATTEMPT_TIMEOUT_S = 10.0
_RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# A proxy in front of an OE that is not there: nothing reached the OE.
_UNAVAILABLE_STATUS = frozenset({502, 503, 504})
_JSON_HEADERS = {"content-type": "application/json"}


class _ConnectionLost(PlatformFailure):
    """The connection to the OE was refused or dropped before an answer came: safe to send again."""


class OEConfigError(ValueError):
    """The OE's address is missing or malformed; the message names the variable and the fix."""


class OEApi(Protocol):
    """What the SDK and the AER need from the OE; `OEClient` speaks it over HTTP, tests in-process."""

    async def tool_execute(self, request: ToolExecuteRequest) -> ToolExecuteAnswer: ...

    async def tool_result(self, request: ToolResultRequest) -> None: ...

    async def graph_stream(self, chunk: GraphStreamChunk) -> None: ...

    async def callback(self, callback: ExecutorCallback) -> None: ...

    async def aclose(self) -> None: ...


def oe_url_from_env(env: Mapping[str, str]) -> str:
    """AGENTIC_OE_URL, required in the AER: every tool and model call goes through the OE."""
    url = env.get(OE_URL_ENV, "").strip()
    if not url:
        raise OEConfigError(
            f"{OE_URL_ENV} is not set; the AER sends every tool and LLM call through the Orchestration "
            "Engine, so set it to the OE's URL (the operator renders it, e.g. http://agent-engine-oe:8080)"
        )
    if not url.startswith(("http://", "https://")):
        raise OEConfigError(f"{OE_URL_ENV} must be an http:// or https:// URL")
    return url.rstrip("/")


class OEClient:
    """One connection pool to the OE for the AER process, authenticated with the runtime token.

    aiohttp's pool, not httpx's: every step of every run in this AER waits on this client, and httpx's
    async pool loses most of its throughput under concurrency (see connectors/async_client.py).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: TokenLike,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        callback_budget_s: float = DEFAULT_CALLBACK_BUDGET_S,
        result_budget_s: float = DEFAULT_RESULT_BUDGET_S,
        execute_budget_s: float = DEFAULT_EXECUTE_BUDGET_S,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        # Read again when its mounted file changes; see `_post` for a 401 during a rotation.
        self._token = as_rotating(token)
        self._call_timeout = aiohttp.ClientTimeout(
            total=call_timeout_s, sock_connect=DEFAULT_CONNECT_TIMEOUT_S
        )
        self._callback_budget_s = callback_budget_s
        self._result_budget_s = result_budget_s
        self._execute_budget_s = execute_budget_s
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _pool(self) -> aiohttp.ClientSession:
        # A pool belongs to one event loop; a client reused under another loop (tests) gets a new one.
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=256, ttl_dns_cache=60),
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,  # no proxy or netrc the platform did not configure
                skip_auto_headers=("User-Agent",),
            )
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def tool_execute(self, request: ToolExecuteRequest) -> ToolExecuteAnswer:
        """Ask the OE to approve and, unless it routes the call back, run one call; sent again while the
        OE cannot be reached (see the module docstring), never after a timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._execute_budget_s
        delay = 0.1
        while True:
            try:
                status, content = await self._post(OE_TOOL_EXECUTE_PATH, request)
            except _ConnectionLost as exc:
                failure: PlatformFailure = exc
            else:
                if status not in _UNAVAILABLE_STATUS:
                    break
                failure = PlatformFailure(f"the OE answered HTTP {status} to POST {OE_TOOL_EXECUTE_PATH}")
            if loop.time() + delay > deadline:
                raise failure
            logger.info(
                "POST %s (step %d) not answered (%s); sending it again in %.1f s",
                OE_TOOL_EXECUTE_PATH,
                request.step,
                failure.message,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
        if status != 200:
            raise PlatformFailure(
                f"the OE answered HTTP {status} to POST {OE_TOOL_EXECUTE_PATH} (step {request.step})"
            )
        try:
            return ToolExecuteAnswer.model_validate_json(content)
        except ValidationError as exc:
            problems = "; ".join(f"{p['field']}: {p['problem']}" for p in validation_problems(exc)[:5])
            raise PlatformFailure(
                f"the OE's answer to POST {OE_TOOL_EXECUTE_PATH} (step {request.step}) is not a valid "
                f"answer: {problems}"
            ) from None

    async def tool_result(self, request: ToolResultRequest) -> None:
        """Report a local tool's outcome; PlatformFailure unless the OE acknowledges it."""
        await self._acknowledged(OE_TOOL_RESULT_PATH, request, budget_s=self._result_budget_s)

    async def graph_stream(self, chunk: GraphStreamChunk) -> None:
        """Send one LangGraph stream-mode chunk for the OE to publish (issue 32); PlatformFailure unless
        the OE acknowledges it."""
        await self._acknowledged(OE_GRAPH_STREAM_PATH, chunk, budget_s=self._result_budget_s)

    async def callback(self, callback: ExecutorCallback) -> None:
        """Report the end of a run; retried with backoff within the callback budget."""
        await self._acknowledged(OE_CALLBACK_PATH, callback, budget_s=self._callback_budget_s)

    async def _post(
        self, path: str, body: BaseModel, *, limits: aiohttp.ClientTimeout | None = None
    ) -> tuple[int, bytes]:
        token = self._token.current()
        status, content = await self._post_as(token, path, body, limits=limits)
        # A rotation under way: the OE's guard refused the token before any handler ran, so the same
        # request goes again with the token file read again, then with the previous token.
        for other in self._token.alternatives(token) if status == 401 else ():
            status, content = await self._post_as(other, path, body, limits=limits)
            if status != 401:
                break
        return status, content

    async def _post_as(
        self, token: str, path: str, body: BaseModel, *, limits: aiohttp.ClientTimeout | None = None
    ) -> tuple[int, bytes]:
        headers = {"authorization": f"Bearer {token}", **_JSON_HEADERS}
        tracing.inject(headers)  # the traceparent back to the OE
        try:
            async with self._pool().post(
                self._base_url + path,
                data=body.model_dump_json().encode(),
                headers=headers,
                timeout=limits or self._call_timeout,
                allow_redirects=False,  # a redirect would carry the bearer token somewhere else
            ) as response:
                return response.status, await response.read()
        except TimeoutError:
            raise PlatformFailure(f"the OE did not answer POST {path} in time") from None
        except aiohttp.ClientConnectorError:
            raise _ConnectionLost(f"POST {path} to the OE failed: cannot connect") from None
        except aiohttp.ClientConnectionError as exc:
            raise _ConnectionLost(f"POST {path} to the OE failed: {type(exc).__name__}") from None
        except aiohttp.ClientError as exc:
            # The type says what failed; the exception text may quote the URL, so it stays out.
            raise PlatformFailure(f"POST {path} to the OE failed: {type(exc).__name__}") from None

    async def _acknowledged(self, path: str, body: BaseModel, *, budget_s: float) -> None:
        """POST until the OE answers 200, retrying what a retry can fix, until `budget_s` is spent."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget_s
        delay = 0.1
        while True:
            remaining = max(deadline - loop.time(), 0.1)
            attempt_timeout = aiohttp.ClientTimeout(
                total=min(remaining, _ACK_ATTEMPT_TIMEOUT_S),
                sock_connect=min(remaining, DEFAULT_CONNECT_TIMEOUT_S),
            )
            try:
                status, _ = await self._post(path, body, limits=attempt_timeout)
            except PlatformFailure as exc:
                failure = exc
            else:
                if status == 200:
                    return
                failure = PlatformFailure(f"the OE answered HTTP {status} to POST {path}")
                if status not in _RETRYABLE_STATUS:
                    raise failure
            if loop.time() + delay > deadline:
                raise failure
            logger.info("POST %s not acknowledged (%s); retrying in %.1f s", path, failure.message, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
