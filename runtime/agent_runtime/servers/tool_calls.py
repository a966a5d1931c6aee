"""Executing one tool call in the Tool Pod, free of HTTP.

A call names a bundle connector's tool (run by that connector's executor against the provider, or by a
built-in connector's `execute`) or a
tenant tool with `is_local=False` (run in-process). Failures come back as a category and an explanation
that is safe to show: no secret value and no raw provider body ever leaves this module. Every outcome is
redacted on its way out (result and explanation, every encoding of every Tool Pod secret: redaction.py),
whatever produced it: a provider that echoes the credential in a 200 answers a redacted result. A tenant
tool that calls `app.suspend` answers `status: "suspend"` with `{reason, payload}` (OE-14).
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import httpx
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from agent_runtime.connectors import (
    ConnectorExecutor,
    CredentialMissingError,
    ToolArgumentError,
    ToolDefinitions,
    UnknownToolError,
    classify_tool_api_error,
)
from agent_runtime.connectors.builtin.registry import create_connector
from agent_runtime.connectors.framework import (
    BuiltinConnector,
    BuiltinConnectorDefs,
    BuiltinToolError,
    TestResult,
)
from agent_runtime.contract import is_platform_env
from agent_runtime.protocol import (
    CallError,
    CallOutcome,
    CallStatus,
    ToolPodExecuteRequest,
    validation_problems,
)
from agent_runtime.redaction import Redactor, redacted_error, redactor_for
from agent_runtime.sdk import PlatformFailure, RequestContext, ToolDefinitionError, ToolSpec
from agent_runtime.sdk.calls import call_scope
from agent_runtime.sdk.context import run_scope
from agent_runtime.sdk.errors import SuspendRequested
from agent_runtime.sdk.tool_messages import TOOL_MESSAGE, tool_message
from agent_runtime.sdk.tracking import CallInterrupted, ExecutionDraining, run_tracked
from agent_runtime.servers.drain import WorkRegistry
from agent_runtime.servers.metrics import ToolMetrics
from agent_runtime.servers.oom_kills import OUT_OF_MEMORY
from agent_runtime.servers.tenant_workers import TenantWorkers, WorkerGone, WorkerOutOfMemory
from agent_runtime.servers.tool_surface import check_unique_tool_names

logger = logging.getLogger(__name__)

# Categories the Tool Pod adds to the connector core's (auth, forbidden, not_found, rate_limited,
# timeout, connection, client_error, server_error); and out_of_memory (servers/oom_kills.py).
UNKNOWN_TOOL = "unknown_tool"
INVALID_ARGUMENTS = "invalid_arguments"
TOOL_ERROR = "tool_error"
TIMEOUT = "timeout"
INTERNAL = "internal"
CREDENTIAL_MISSING = "credential_missing"


# The `POST /execute` body (unknown fields are ignored: the OE may be newer than this image).
ExecuteRequest = ToolPodExecuteRequest


class _TenantToolFailure(Exception):
    """A tenant tool call that failed in a way the Tool Pod can state exactly (category and explanation)."""

    def __init__(self, category: str, explanation: str) -> None:
        super().__init__(explanation)
        self.category = category
        self.explanation = explanation


@dataclass(frozen=True)
class _ConnectorTool:
    executor: ConnectorExecutor
    connector: str


@dataclass(frozen=True)
class _BuiltinTool:
    connector: BuiltinConnector


def check_required_secrets(tenant_tools: Sequence[ToolSpec], secret_env: Mapping[str, str]) -> None:
    """Refuse to start when a Tool Pod tool's `required_secrets` are not all in the tenant environment."""
    for spec in tenant_tools:
        missing = [name for name in spec.required_secrets if not secret_env.get(name)]
        if missing:
            raise ToolDefinitionError(
                f"tool {spec.name!r} requires the secret env {', '.join(missing)}, which is not set in the "
                "Tool Pod; add it to the Agent's tool secrets (or drop it from required_secrets)"
            )


def check_connector_credentials(connectors: Sequence[ToolDefinitions], secret_env: Mapping[str, str]) -> None:
    """Refuse to start when a connector's credential env (auth.env) cannot reach its executor."""
    for defs in connectors:
        name = defs.auth.env if defs.auth is not None else None
        if not name:
            continue
        if is_platform_env(name):
            raise ToolDefinitionError(
                f"connector {defs.name!r}: auth.env {name} is a platform variable name, which never reaches "
                "connectors; rename the credential's env in the Connector's auth.env"
            )
        if not secret_env.get(name):
            raise ToolDefinitionError(
                f"connector {defs.name!r} reads its credential from env {name}, which is not set in the "
                "Tool Pod; provide the Connector's auth secret"
            )


def check_builtin_credentials(
    builtins: Sequence[BuiltinConnectorDefs], secret_env: Mapping[str, str]
) -> None:
    """Refuse to start when a built-in connector's credential env cannot reach it (as for auth.env)."""
    for defs in builtins:
        for field_name, name in sorted(defs.credentials.items()):
            if is_platform_env(name):
                raise ToolDefinitionError(
                    f"connector {defs.name!r}: credential {field_name} is read from {name}, a platform "
                    "variable name, which never reaches connectors; rename it in the Connector's credentials"
                )
            if not secret_env.get(name):
                raise ToolDefinitionError(
                    f"connector {defs.name!r} reads its {field_name} from env {name}, which is not set in "
                    "the Tool Pod; provide the Connector's credential Secret"
                )


class ToolCallService:
    """Routes each call to its connector executor or tenant tool; one executor per connector for life."""

    def __init__(
        self,
        *,
        connectors: Sequence[ToolDefinitions],
        tenant_tools: Sequence[ToolSpec],
        secret_env: Mapping[str, str],
        metrics: ToolMetrics,
        pod_name: str | None = None,
        pod_address: str | None = None,
        work: WorkRegistry | None = None,
        builtins: Sequence[BuiltinConnectorDefs] = (),
        workers: TenantWorkers | None = None,
    ) -> None:
        remote = [spec for spec in tenant_tools if not spec.is_local]
        # With workers, tenant bodies run in their own processes with only their declared secrets.
        self._workers = workers
        self._pod_name = pod_name
        self._pod_address = pod_address
        # Calls with an execution are tracked here, so a drain or an interrupt can stop them (DR-12).
        self._work = work
        check_unique_tool_names(connectors=connectors, tenant_tools=remote, builtins=builtins)
        check_required_secrets(remote, secret_env)
        check_connector_credentials(connectors, secret_env)
        check_builtin_credentials(builtins, secret_env)
        # Read-only: each call sees the Tool Pod's tenant secrets and nothing a caller or an earlier call set.
        self._secret_env: Mapping[str, str] = MappingProxyType(dict(secret_env))
        self._secret_values = tuple(v for v in self._secret_env.values() if v)
        self.redactor: Redactor = redactor_for(self._secret_values)
        self._metrics = metrics
        self._executors = [ConnectorExecutor(defs) for defs in connectors]
        self._routes: dict[str, _ConnectorTool | _BuiltinTool | ToolSpec] = {}
        for defs, executor in zip(connectors, self._executors, strict=True):
            for tool in defs.tools:
                self._routes[tool.name] = _ConnectorTool(executor=executor, connector=defs.name)
        # One live connector per built-in entry for the pod's life (its pool is reused across calls).
        self._builtins = [create_connector(defs) for defs in builtins]
        for defs, connector in zip(builtins, self._builtins, strict=True):
            for tool in defs.tools:
                self._routes[tool.name] = _BuiltinTool(connector=connector)
        for spec in remote:
            self._routes[spec.name] = spec

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(self._routes)

    def is_cancellable(self, tool: str) -> bool:
        """False for a sync tenant body, which runs in a worker thread that no signal reaches (IC-07)."""
        target = self._routes.get(tool)
        return not isinstance(target, ToolSpec) or target.is_async

    async def _tracked_run(self, call: ExecuteRequest) -> Any:
        """`_run` as tracked work of its execution; refused while that execution drains (DR-10)."""
        try:
            return await run_tracked(
                self._work,
                execution_id=call.execution_id,
                step=call.step,
                cancellable=self.is_cancellable(call.tool),
                start=lambda: self._run(call),
            )
        except (ExecutionDraining, CallInterrupted) as exc:
            raise _TenantToolFailure(exc.category, exc.explanation) from None

    async def test_connector(self, name: str) -> TestResult | None:
        """Connector `name`'s test_connection with the pod's credentials, its detail redacted; None when no
        connector has that name. An OpenAPI connector has no test of its own: its result says so."""
        for connector in self._builtins:
            if connector.name == name:
                try:
                    found = await connector.test_connection(env=self._secret_env)
                except Exception as exc:  # a connector's bug is the test's failure, never the pod's 500
                    found = TestResult(ok=False, detail=f"the test raised {type(exc).__name__}")
                return found.model_copy(update={"detail": self.redactor.text(found.detail)})
        for executor in self._executors:
            if executor.definitions.name == name:
                return TestResult(
                    ok=True,
                    detail="an OpenAPI connector has no connection test; its calls are checked when made",
                )
        return None

    async def start(self) -> None:
        """Start the tenant tool workers (when there are any), before the pod is ready."""
        if self._workers is not None:
            await self._workers.start()

    async def aclose(self) -> None:
        """Close every executor's connection pool."""
        if self._workers is not None:
            await self._workers.aclose()
        for executor in self._executors:
            await executor.aclose()
        for connector in self._builtins:
            await connector.aclose()

    async def execute(self, call: ExecuteRequest) -> CallOutcome:
        """Run one call; never raises for a tool failure or a suspension, only reports it."""
        started = time.perf_counter()
        self._metrics.call_started()
        status: CallStatus = "success"
        error: CallError | None = None
        result: Any = None
        try:
            # The body may ask for this call's idempotency key (`sdk.idempotency_key()`).
            with call_scope(call.execution_id, call.step):
                result = await self._tracked_run(call)
        except SuspendRequested as signal:
            # Out of band: the status says "suspend"; a tool returning {"status": "suspend"} is a success.
            try:
                result, status = (
                    {"reason": signal.reason, "payload": to_jsonable_python(signal.payload)},
                    "suspend",
                )
            except PydanticSerializationError:
                explanation = f"tool {call.tool!r} suspended with a payload that is not JSON-serializable"
                error = CallError(category=TOOL_ERROR, explanation=explanation)
        except (Exception, PlatformFailure) as exc:
            error = self._classify(call, exc)
        duration_s = time.perf_counter() - started
        self._metrics.call_finished(
            tool=call.tool, error_category=error.category if error else None, duration_s=duration_s
        )
        duration_ms = duration_s * 1000
        if error is not None:
            logger.warning("tool %s failed: %s", call.tool, error.category)
            return CallOutcome(
                status="error",
                error=redacted_error(error, self.redactor),
                duration_ms=duration_ms,
                pod_name=self._pod_name,
                pod_address=self._pod_address,
            )
        if status == "suspend":
            logger.info("tool %s suspended the execution", call.tool)
        return CallOutcome(
            status=status,
            result=self.redactor.value(result),
            duration_ms=duration_ms,
            pod_name=self._pod_name,
            pod_address=self._pod_address,
        )

    async def _run(self, call: ExecuteRequest) -> Any:
        target = self._routes.get(call.tool)
        if target is None:
            raise UnknownToolError(call.tool)
        if isinstance(target, _ConnectorTool):
            response = await target.executor.aexecute(call.tool, call.arguments, env=self._secret_env)
            return response.model_dump(mode="json")
        if isinstance(target, _BuiltinTool):
            return to_jsonable_python(
                await target.connector.execute(call.tool, call.arguments, env=self._secret_env)
            )
        if self._workers is not None and self._workers.handles(target.name):
            return await self._run_in_worker(target, call)
        # A tenant body runs in its execution's context: its MemoryClient presents the OE's memory
        # statement the call carried (issue 27); it has no OE of its own, so it makes no tool or model call.
        context = RequestContext(
            execution_id=call.execution_id or "",
            user_id=call.user_id,
            org_id=call.org_id,
            memory_credential=call.memory_credential,
        )
        with run_scope(context, oe=None):
            return await self._run_tenant(target, call.arguments)

    async def _run_in_worker(self, spec: ToolSpec, call: ExecuteRequest) -> Any:
        """The body in its worker process (servers/tenant_workers.py); its answer mapped as in-process."""
        assert self._workers is not None
        context = {
            "execution_id": call.execution_id,
            "step": call.step,
            "user_id": call.user_id,
            "org_id": call.org_id,
            "memory_credential": call.memory_credential,
        }
        try:
            reply = await self._workers.call(spec, call.arguments, context)
        except WorkerOutOfMemory as exc:
            raise _TenantToolFailure(OUT_OF_MEMORY, f"tool {spec.name!r} failed: {exc}") from None
        except WorkerGone as exc:
            raise _TenantToolFailure(TOOL_ERROR, f"tool {spec.name!r} failed: {exc}") from None
        fields = reply.fields
        if reply.status == "ok":
            return fields.get("result")
        if reply.status == "suspend":
            raise SuspendRequested(str(fields.get("reason") or ""), fields.get("payload"))
        if reply.status == "message":
            raise _TenantToolFailure(TOOL_MESSAGE, str(fields.get("text") or ""))
        if reply.status == "failure":
            raise _TenantToolFailure(str(fields.get("category")), str(fields.get("explanation")))
        if reply.status == "cancelled":
            raise asyncio.CancelledError
        logger.error(
            "tool %s raised %s:\n%s",
            spec.name,
            fields.get("error_type"),
            self.redactor.text(str(fields.get("log") or "")).rstrip(),
        )
        raise _TenantToolFailure(
            TOOL_ERROR, f"tool {spec.name!r} failed with {fields.get('error_type')}; see the Tool Pod log"
        )

    @staticmethod
    async def _run_tenant(spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        try:
            kwargs = spec.bind(arguments)
        except ValidationError as exc:
            problems = "; ".join(f"{p['field']}: {p['problem']}" for p in validation_problems(exc))
            raise _TenantToolFailure(
                INVALID_ARGUMENTS, f"tool {spec.name!r} arguments are invalid: {problems}"
            ) from None
        try:
            async with asyncio.timeout(spec.timeout_s) as deadline:
                result = await spec.acall(kwargs)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise _TenantToolFailure(
                TIMEOUT, f"tool {spec.name!r} did not finish within its timeout_s={spec.timeout_s:g}"
            ) from None
        try:
            return to_jsonable_python(result)
        except PydanticSerializationError:
            raise _TenantToolFailure(
                TOOL_ERROR,
                f"tool {spec.name!r} returned a {type(result).__name__}, which is not JSON-serializable",
            ) from None

    def _classify(self, call: ExecuteRequest, exc: BaseException) -> CallError:
        """Map an exception to a category and a safe explanation (the only thing that leaves the pod)."""
        if isinstance(exc, UnknownToolError):
            return CallError(
                category=UNKNOWN_TOOL,
                explanation=f"this Tool Pod has no tool named {call.tool!r}; GET /tools lists its tools",
            )
        if isinstance(exc, ToolArgumentError):
            return CallError(category=INVALID_ARGUMENTS, explanation=self.redactor.text(str(exc)))
        if isinstance(exc, CredentialMissingError):
            return CallError(category=CREDENTIAL_MISSING, explanation=self.redactor.text(str(exc)))
        if isinstance(exc, _TenantToolFailure):
            return CallError(category=exc.category, explanation=exc.explanation)
        if isinstance(exc, BuiltinToolError):
            return CallError(
                category=exc.category,
                explanation=self.redactor.text(exc.explanation)[:2000],
                status_code=exc.status_code,
            )
        if isinstance(exc, (httpx.HTTPStatusError, httpx.TimeoutException, httpx.TransportError)):
            classified = classify_tool_api_error(exc, secrets=self._secret_values)
            return CallError(
                category=classified.category,
                explanation=classified.explanation,
                status_code=classified.status_code,
            )
        target = self._routes.get(call.tool)
        told = tool_message(exc) if isinstance(target, ToolSpec) else None
        if told is not None:
            # A tenant tool's ToolError (or LangChain ToolException): meant for the model, secrets removed.
            return CallError(category=TOOL_MESSAGE, explanation=self.redactor.text(told))
        category = TOOL_ERROR if isinstance(target, ToolSpec) else INTERNAL
        # The message may quote anything (a provider body, a credential): only the type leaves the pod;
        # the log keeps the traceback with known secret values removed.
        logger.error(
            "tool %s raised %s:\n%s",
            call.tool,
            type(exc).__name__,
            self.redactor.text("".join(traceback.format_exception(exc)).rstrip()),
        )
        return CallError(
            category=category,
            explanation=f"tool {call.tool!r} failed with {type(exc).__name__}; see the Tool Pod log",
        )
