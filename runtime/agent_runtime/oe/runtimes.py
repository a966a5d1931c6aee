"""The OE's calls into an Agent's runtimes: AER `/execute`, Tool Pod `/execute` and `/invoke_llm`.

aiohttp's pool, not httpx's: the OE sits on every step of every execution, and httpx's async pool loses
most of its throughput under concurrency (see connectors/async_client.py). Each call carries the
OE's statement for that call (oe/runtime_auth.py); no error text here ever quotes a credential.
"""

from __future__ import annotations

import asyncio
import json
import logging
import select
import time
from typing import Any
from urllib.parse import quote

import aiohttp
from pydantic import ValidationError

from agent_runtime.execution_token import MEMORY_TTL_S
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.runtime_auth import authorized
from agent_runtime.oe.tool_pod_stream import NDJSON, DeltaHandler, StreamBroken, read_streamed_outcome
from agent_runtime.protocol import (
    AER_EXECUTE_PATH,
    CONNECTOR_TEST_PATH,
    INVOKE_LLM_PATH,
    TOOL_EXECUTE_PATH,
    TOOL_POD_UNREACHABLE,
    AERExecuteRequest,
    AERExecutionStatus,
    CallError,
    CallOutcome,
    InvokeLLMRequest,
)

logger = logging.getLogger(__name__)

AER_EXECUTIONS_PATH = "/executions"
AER_TOOLS_PATH = "/tools"


class _FreshConnector(aiohttp.TCPConnector):
    """A pool that never hands out a kept-alive connection whose peer has gone: an idle HTTP/1.1 connection
    has nothing to read, so a readable one holds the EOF or reset of a process that died (a restarted Tool
    Pod). Reusing it would fail the next call after it was sent, which the OE must then report as "may have
    run", though it never reached anyone; urllib3 checks the same way before reusing a connection."""

    async def _get(self, key: Any, traces: Any) -> Any:
        while True:
            connection = await super()._get(key, traces)
            if connection is None or not _peer_closed(connection):
                return connection
            connection.close()


def _peer_closed(connection: Any) -> bool:
    transport = connection.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class RuntimeUnavailable(Exception):
    """The AER did not accept a run; the message is safe to store and show. `retryable`: it could not be
    reached (it may be restarting), as opposed to an answer refusing the run."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class Runtimes:
    """One connection pool for every Agent's runtimes, opened on the serving event loop."""

    def __init__(
        self,
        *,
        call_timeout_s: float = 600.0,
        connect_timeout_s: float = 5.0,
        tool_pod_connect_retry_s: float = 15.0,
    ) -> None:
        self._timeout = aiohttp.ClientTimeout(total=call_timeout_s, sock_connect=connect_timeout_s)
        self._short = aiohttp.ClientTimeout(total=10.0, sock_connect=connect_timeout_s)
        self._connect_retry_s = tool_pod_connect_retry_s
        self._session: aiohttp.ClientSession | None = None

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=_FreshConnector(limit=256, ttl_dns_cache=60),
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def start_run(
        self, reg: AgentRegistration, request: AERExecuteRequest
    ) -> AERExecutionStatus | None:
        """Ask the AER to run (or re-run) an execution; raises RuntimeUnavailable unless it accepted.

        Returns its answer, which names the pod that took the run (None when it was already running there).
        """
        url = reg.aer_url + AER_EXECUTE_PATH
        # The run's memory statement: its MemoryClient passes it on, and the Memory server takes the user
        # and org from it alone. Signed afresh for each run (a resume gets its own).
        memory = reg.statements(
            "memory",
            execution_id=request.execution_id,
            user_id=request.user_id,
            org_id=request.org_id,
            ttl_s=MEMORY_TTL_S,
        )
        if memory:
            request = request.model_copy(update={"memory_credential": memory[0]})
        body = request.model_dump_json().encode()
        try:
            async with authorized(
                self._pool(),
                "POST",
                url,
                reg=reg,
                audience="aer",
                execution_id=request.execution_id,
                user_id=request.user_id,
                org_id=request.org_id,
                data=body,
                timeout=self._short,
            ) as response:
                # 409: this AER runs it already (another OE replica, or a retry, got there first).
                if response.status in (200, 202):
                    return _accepted(await response.read())
                if response.status == 409:
                    return None
                raise RuntimeUnavailable(
                    f"the AER of {reg.agent} refused the run with HTTP {response.status}", retryable=False
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise RuntimeUnavailable(
                f"the AER of {reg.agent} is unreachable ({type(exc).__name__})", retryable=True
            ) from None

    async def execution_alive(self, reg: AgentRegistration, execution_id: str) -> bool | None:
        """True if the AER runs it, False if it says it does not, None if it could not be asked."""
        url = f"{reg.aer_url}{AER_EXECUTIONS_PATH}/{execution_id}"
        try:
            async with authorized(
                self._pool(),
                "GET",
                url,
                reg=reg,
                audience="aer",
                execution_id=execution_id,
                timeout=self._short,
            ) as response:
                if response.status == 200:
                    return True
                if response.status == 404:
                    return False
                return None
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def list_tools(self, reg: AgentRegistration) -> list[dict[str, Any]] | None:
        """The AER's `GET /tools` (with `is_local` and `sensitive`), or None when it cannot be read."""
        url = reg.aer_url + AER_TOOLS_PATH
        try:
            async with authorized(
                self._pool(), "GET", url, reg=reg, audience="aer", timeout=self._short
            ) as response:
                if response.status != 200:
                    logger.warning("the AER of %s answered HTTP %d to GET /tools", reg.agent, response.status)
                    return None
                tools = json.loads(await response.read()).get("tools")
        except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError) as exc:
            logger.warning("the AER of %s did not list its tools (%s)", reg.agent, type(exc).__name__)
            return None
        return tools if isinstance(tools, list) else None

    async def aer_json(
        self, reg: AgentRegistration, method: str, path: str, *, body: bytes | None = None
    ) -> tuple[int, Any]:
        """One JSON request to the AER (its thread routes, servers/thread_http.py): status and parsed
        answer; raises RuntimeUnavailable when the AER cannot be asked."""
        try:
            async with authorized(
                self._pool(),
                method,
                reg.aer_url + path,
                reg=reg,
                audience="aer",
                data=body,
                timeout=self._short,
            ) as response:
                raw = await response.read()
                return response.status, json.loads(raw) if raw else None
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise RuntimeUnavailable(
                f"the AER of {reg.agent} did not answer ({type(exc).__name__})", retryable=True
            ) from None

    async def test_connector(self, reg: AgentRegistration, connector: str) -> tuple[int, dict[str, Any]]:
        """The Tool Pod's `POST /connectors/{name}/test`: its HTTP status and JSON answer; raises
        RuntimeUnavailable when the Tool Pod cannot be asked."""
        url = f"{reg.tool_url}{CONNECTOR_TEST_PATH.format(name=quote(connector, safe=''))}"
        try:
            async with authorized(
                self._pool(), "POST", url, reg=reg, audience="tool", timeout=self._short
            ) as response:
                status, raw = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise RuntimeUnavailable(
                f"the Tool Pod of {reg.agent} is unreachable ({type(exc).__name__})", retryable=True
            ) from None
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise RuntimeUnavailable(
                f"the Tool Pod of {reg.agent} answered HTTP {status} without a JSON object", retryable=False
            )
        return status, body

    async def execute_tool(
        self,
        reg: AgentRegistration,
        *,
        tool: str,
        arguments: dict[str, Any],
        execution_id: str,
        step: int,
        user_id: str | None = None,
        org_id: str | None = None,
    ) -> CallOutcome:
        body: dict[str, Any] = {
            "tool": tool,
            "arguments": arguments,
            "execution_id": execution_id,
            "step": step,
        }
        # A tenant tool body in the Tool Pod gets the run's memory statement, as the AER's run does (the
        # signer's cache hands out the very statement the run has). Model calls get none.
        memory = reg.statements(
            "memory", execution_id=execution_id, user_id=user_id, org_id=org_id, ttl_s=MEMORY_TTL_S
        )
        if memory:
            body.update(user_id=user_id, org_id=org_id, memory_credential=memory[0])
        return await self._call(reg, TOOL_EXECUTE_PATH, body, execution_id=execution_id)

    async def invoke_llm(self, reg: AgentRegistration, request: InvokeLLMRequest) -> CallOutcome:
        return await self._call(
            reg, INVOKE_LLM_PATH, request.model_dump(mode="json"), execution_id=request.execution_id or ""
        )

    async def invoke_llm_streamed(
        self, reg: AgentRegistration, request: InvokeLLMRequest, *, on_delta: DeltaHandler
    ) -> CallOutcome:
        """The model call with its stream: each `LLMDelta` to `on_delta` as the Tool Pod sends it, then the
        outcome. Failures are the Tool Pod's, as for `invoke_llm` (a refused connection is retried)."""
        body = request.model_copy(update={"stream": True}).model_dump(mode="json")
        return await self._call(
            reg, INVOKE_LLM_PATH, body, execution_id=request.execution_id or "", on_delta=on_delta
        )

    async def _call(
        self,
        reg: AgentRegistration,
        path: str,
        body: dict[str, Any],
        *,
        execution_id: str,
        on_delta: DeltaHandler | None = None,
    ) -> CallOutcome:
        """POST to the Tool Pod. Unreachable or a broken answer is the tool's failure (OE-12), not ours.

        A refused connection means nothing was sent, so it is retried for `tool_pod_connect_retry_s` (a
        restarting Tool Pod is a pause, not a failure). Once the request is out, a lost answer is never
        retried here: the call may have run, and the model is told it failed.
        """
        started = time.perf_counter()
        url = reg.tool_url + path
        data = json.dumps(body).encode()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_retry_s
        delay = 0.1
        while True:
            try:
                async with authorized(
                    self._pool(),
                    "POST",
                    url,
                    reg=reg,
                    audience="tool",
                    execution_id=execution_id,
                    data=data,
                    timeout=self._timeout,
                    accept=NDJSON if on_delta is not None else None,
                ) as response:
                    if response.status != 200:
                        await response.read()
                        return _unreachable(f"the Tool Pod answered HTTP {response.status}", started)
                    if on_delta is not None and response.content_type == NDJSON:
                        return await read_streamed_outcome(response.content.iter_any(), on_delta=on_delta)
                    payload = await response.read()
                return CallOutcome.model_validate_json(payload)
            except aiohttp.ClientConnectorError as exc:
                if loop.time() + delay > deadline:
                    return _unreachable(f"the Tool Pod could not be reached ({type(exc).__name__})", started)
            except (TimeoutError, aiohttp.ClientError) as exc:
                return _unreachable(
                    f"the Tool Pod went away while the call ran ({type(exc).__name__}); it may have taken "
                    "effect, so it is not run again",
                    started,
                )
            except ValidationError:
                return _unreachable("the Tool Pod's answer was not a call outcome", started)
            except StreamBroken as exc:
                return _unreachable(f"{exc}; it may have taken effect, so it is not run again", started)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


def _accepted(raw: bytes) -> AERExecutionStatus | None:
    try:
        return AERExecutionStatus.model_validate_json(raw)
    except ValidationError:
        return None  # an AER that accepted without saying so: the run goes on, the Service is its address


def _unreachable(explanation: str, started: float) -> CallOutcome:
    return CallOutcome(
        status="error",
        error=CallError(category=TOOL_POD_UNREACHABLE, explanation=explanation),
        duration_ms=(time.perf_counter() - started) * 1000,
    )
