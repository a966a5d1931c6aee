"""The OE's A2A server, one per Agent (issue 38), on the official SDK's JSON-RPC dispatcher.

- `GET  /a2a/{project}/{agent}/.well-known/agent-card.json`: the Agent's card (`oe/a2a_mapping.py`).
- `POST /a2a/{project}/{agent}/`: JSON-RPC, A2A 1.0 (`SendMessage`, `SendStreamingMessage`, `GetTask`,
  `CancelTask`, `SubscribeToTask`) and 0.3's names (`message/send`, `message/stream`, `tasks/get`,
  `tasks/cancel`, `tasks/resubscribe`).

A task is an execution, so every turn is governed, audited and replayable as one through `/invoke` is.
Each request is a client request: authenticated by the client guard, then `agents/invoke` on the Agent of
the path (refused with the client API's own 403 Status body); reading a task needs `agents/executions`
(a task of another Agent, or one the caller may not read, is "task not found" alike), cancelling
`agents/cancel`, a decision on a held task `agents/approve`, as on the gateway resume route.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.oe.a2a_mapping import (
    SETTLING_EVENTS,
    MessageProblem,
    agent_card,
    artifact_update,
    message_decision,
    message_input,
    progress_update,
    status_update,
    task_of,
)
from agent_runtime.oe.client_auth import (
    APPROVE,
    CANCEL,
    INVOKE,
    READ,
    Attributes,
    Caller,
    Permission,
    ReviewUnavailable,
    forbidden_body,
    on_agents,
)
from agent_runtime.oe.engine import BadReview, Conflict, NotFound, Orchestrator, UnknownAgent
from agent_runtime.oe.events import Lagging
from agent_runtime.oe.limiter import LimitReached, refusal_detail
from agent_runtime.oe.reviews import ReviewBodyError, flat_review
from agent_runtime.oe.store.base import EventRecord, ExecutionRecord
from agent_runtime.protocol import TERMINAL_STATES, ExecutionState, InvokeRequest
from agent_runtime.servers.bodies import MAX_BODY_BYTES, read_request_body, too_large

Handler = Callable[[Request], Awaitable[Response]]
Require = Callable[[Caller, Attributes], Awaitable[None]]
Allowed = Callable[[Caller, Attributes], Awaitable[bool]]
PREFIX = "/a2a/{project_id}/{agent}"
# A blocking message/send answers when the run ends or waits for a human, or with the task still working
# after this long (the client then polls tasks/get or resubscribes).
SEND_WAIT_S = 60.0
# Request fields a pydantic problem names, as the A2A request spells them.
_FIELDS = {"session_id": "message.contextId", "input": "message.parts", "agent": "(path) agent"}


# The SDK logs every malformed request, with its parser's words (which may quote what the caller sent) and a
# traceback; a client's bad input is answered, not logged. Its server faults (at ERROR) still are.
_SDK_LOGGERS = (
    "a2a.server.routes.jsonrpc_dispatcher",
    "a2a.compat.v0_3.jsonrpc_adapter",
    "a2a.utils.version_validator",
)
_CLIENT_FAULTS = frozenset(
    {
        "Failed to validate base JSON-RPC request",
        "Failed to validate base JSON-RPC request for v0.3",
        "Failed to parse request params",
    }
)


class ClientFaults(logging.Filter):
    """Drops the SDK's records of a client's malformed request: its warnings, and its parse failures."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR and record.msg not in _CLIENT_FAULTS


def quiet_client_faults() -> None:
    for name in _SDK_LOGGERS:
        found = logging.getLogger(name)
        if not any(isinstance(f, ClientFaults) for f in found.filters):
            found.addFilter(ClientFaults())


def _problems(exc: ValidationError) -> list[dict[str, str]]:
    """Pydantic errors as {field, message} (A2A's BadRequest details), never echoing the input."""
    return [
        {
            "field": _FIELDS.get(str(error["loc"][0]), str(error["loc"][0])) if error["loc"] else "(request)",
            "message": error["msg"],
        }
        for error in exc.errors(include_url=False, include_input=False, include_context=False)
    ]


def _invalid(field: str, problem: str) -> InvalidParamsError:
    return InvalidParamsError(
        message=f"{field}: {problem}", data={"errors": [{"field": field, "message": problem}]}
    )


class _Context(DefaultServerCallContextBuilder):
    """The SDK's call context with who is calling and which Agent the path names; no credential in it."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        headers = context.state.get("headers", {})
        context.state["headers"] = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        context.state["caller"] = request.state.caller
        context.state["agent"] = f"{request.path_params['project_id']}/{request.path_params['agent']}"
        return context


class ExecutionTasks(RequestHandler):
    """A2A's request handler over the Orchestrator: a task is an execution, a context a session."""

    def __init__(
        self, engine: Orchestrator, *, allowed: Allowed, created: Callable[[], None], send_wait_s: float
    ) -> None:
        self.engine = engine
        self._allowed = allowed
        self._created = created
        self._send_wait_s = send_wait_s

    # who and what ---------------------------------------------------------------------------------------

    @staticmethod
    def _who(context: ServerCallContext) -> tuple[Caller, str]:
        return context.state["caller"], context.state["agent"]

    async def _may(self, context: ServerCallContext, permission: Permission) -> bool:
        caller, agent = self._who(context)
        namespace, name = agent.split("/", 1)
        try:
            return await self._allowed(caller, on_agents(permission, namespace, name))
        except ReviewUnavailable as exc:
            raise InternalError(message=f"cannot check access: {exc}") from None

    async def _require(self, context: ServerCallContext, permission: Permission) -> None:
        if not await self._may(context, permission):
            caller, agent = self._who(context)
            namespace, name = agent.split("/", 1)
            status = forbidden_body(caller.identity, on_agents(permission, namespace, name))
            raise InvalidRequestError(message=status["message"], data={"status": status})

    async def _task(self, context: ServerCallContext, task_id: str) -> ExecutionRecord:
        """The execution `task_id` of the path's Agent, readable by the caller; else task not found."""
        _, agent = self._who(context)
        missing = TaskNotFoundError(message=f"no task {task_id[:256]!r} on Agent {agent}")
        record = await self.engine.store.get_execution(task_id) if 0 < len(task_id) <= 256 else None
        if record is None or record.agent != agent or not await self._may(context, READ):
            raise missing
        return record

    async def _current(self, execution_id: str) -> ExecutionRecord:
        record = await self.engine.store.get_execution(execution_id)
        if record is None:
            raise TaskNotFoundError(message=f"no task {execution_id!r}")
        return record

    # starting and continuing --------------------------------------------------------------------------

    async def _invoke(self, message: Message, context: ServerCallContext, *, stream: bool) -> ExecutionRecord:
        caller, agent = self._who(context)
        try:
            agent_input = message_input(message)
        except MessageProblem as problem:
            raise _invalid(problem.field, problem.problem) from None
        try:
            request = InvokeRequest.model_validate(
                {
                    "agent": agent,
                    "input": agent_input,
                    "session_id": message.context_id or None,
                    # As /invoke: the user is who the token says (the static token stands for none).
                    "user_id": None if caller.static else caller.identity.username,
                    "stream": stream,
                }
            )
        except ValidationError as exc:
            problems = _problems(exc)
            raise InvalidParamsError(
                message="; ".join(f"{p['field']}: {p['message']}" for p in problems),
                data={"errors": problems},
            ) from None
        # A message sent again under its id (a client that lost the answer, an `agent` connector resending
        # one call after a crash) is the task it started, for the same caller on the same Agent: the id's
        # claim is unique in the store, so a resend never starts a second execution.
        execution_id = uuid.uuid4().hex
        if message.message_id:
            who = f"{agent}\n{caller.identity.username}\n{caller.identity.uid or ''}\n{message.message_id}"
            key = f"a2a-message:{hashlib.sha256(who.encode()).hexdigest()}"
            taken = await self.engine.store.claim_once(key, {"execution_id": execution_id})
            if taken is not None:
                # Its task, or (the first attempt was refused, or its OE died before creating it) the
                # id it claimed: a resend never gets a second one.
                execution_id = str(taken.get("execution_id"))
                earlier = await self.engine.store.get_execution(execution_id)
                if earlier is not None:
                    if earlier.agent != agent:
                        raise TaskNotFoundError(message=f"no task for message {message.message_id[:256]!r}")
                    return earlier
        try:
            record = await self.engine.invoke(request, invoked_by=caller.identity, execution_id=execution_id)
        except KeyError:
            # The same message at the same moment, through another request or replica: its task.
            existing = await self.engine.store.get_execution(execution_id)
            if existing is None:
                raise
            return existing
        except UnknownAgent as exc:
            raise TaskNotFoundError(message=str(exc)) from None
        except LimitReached as exc:
            refusal = exc.refusal
            raise InvalidRequestError(
                message=refusal.message, data={"error": refusal.category, **refusal_detail(refusal)}
            ) from None
        self._created()
        return record

    async def _decide(
        self, record: ExecutionRecord, message: Message, context: ServerCallContext
    ) -> ExecutionRecord:
        """A held task's message: the decision, authorized and applied as the gateway resume route does."""
        await self._require(context, APPROVE)
        caller, _ = self._who(context)
        try:
            review = flat_review(message_decision(message))
        except MessageProblem as problem:
            raise _invalid(problem.field, problem.problem) from None
        except ReviewBodyError as exc:
            errors = [
                {"field": f"message.parts[0].data.{p['field']}", "message": p["problem"]}
                for p in exc.problems
            ]
            raise InvalidParamsError(message=str(exc), data={"errors": errors}) from None
        try:
            return await self.engine.resume(
                record.execution_id, review, project_id=record.project_id, decided_by=caller.identity
            )
        except BadReview as exc:
            raise _invalid(f"message.parts[0].data.{exc.field}", exc.problem) from None
        except Conflict as exc:
            raise InvalidRequestError(message=str(exc), data={"error": exc.code}) from None
        except NotFound:
            raise TaskNotFoundError(message=f"no task {record.execution_id!r}") from None

    async def _start(
        self, params: SendMessageRequest, context: ServerCallContext, *, stream: bool
    ) -> tuple[ExecutionRecord, int]:
        """The execution the message starts or answers, and how many decisions it had (events before the
        last of them are its past)."""
        message = params.message
        if not message.task_id:
            return await self._invoke(message, context, stream=stream), 0
        record = await self._task(context, message.task_id)
        if message.context_id and message.context_id != record.session_id:
            raise _invalid(
                "message.contextId", "is not this task's context: leave it out or send the task's own"
            )
        if record.status is ExecutionState.SUSPENDED:
            updated = await self._decide(record, message, context)
            return updated, len(updated.reviews)
        if record.status in TERMINAL_STATES:
            raise UnsupportedOperationError(
                message=f"task {record.execution_id} is {record.status.value} and takes no more messages: "
                "send a new message without taskId (the same contextId continues the session)"
            )
        raise UnsupportedOperationError(
            message=f"task {record.execution_id} is {record.status.value}: it takes a message only while it "
            "waits for a human (input-required)"
        )

    # following ------------------------------------------------------------------------------------------

    async def _events(self, execution_id: str) -> AsyncIterator[EventRecord]:
        """The execution's events from its first, through a slow reader's reconnects, to its end."""
        after = 0
        while True:
            follow = self.engine.events.follow(execution_id, after_seq=after)
            lagged = False
            try:
                async for item in follow:
                    if isinstance(item, Lagging):
                        after, lagged = item.after, True
                        break
                    if item is not None:
                        after = item.seq
                        yield item
            finally:
                await follow.aclose()
            if not lagged:
                return

    async def _now(self, execution_id: str, *, decisions: int) -> AsyncIterator[EventRecord]:
        """Its events since its latest decision (`decisions` made so far): what a client has not seen."""
        seen = 0
        async for event in self._events(execution_id):
            if event.type == "resumed":
                seen += 1
                if seen < decisions:
                    continue
            if seen >= decisions:
                yield event

    async def _settled(self, record: ExecutionRecord, *, decisions: int) -> ExecutionRecord:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._send_wait_s):
                async for event in self._now(record.execution_id, decisions=decisions):
                    if event.type in SETTLING_EVENTS:
                        break
        return await self._current(record.execution_id)

    async def _updates(self, record: ExecutionRecord, *, decisions: int) -> AsyncIterator[Any]:
        async for event in self._now(record.execution_id, decisions=decisions):
            if event.type not in SETTLING_EVENTS:
                yield progress_update(event, context_id=record.session_id)
                continue
            latest = await self._current(record.execution_id)
            if latest.status is ExecutionState.COMPLETED:
                yield artifact_update(latest)
            yield status_update(latest)
            return

    # the protocol's methods -----------------------------------------------------------------------------

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        record, decisions = await self._start(params, context, stream=False)
        if not params.configuration.return_immediately:
            record = await self._settled(record, decisions=decisions)
        return task_of(record)

    async def on_message_send_stream(  # type: ignore[override]
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncIterator[Any]:
        record, decisions = await self._start(params, context, stream=True)
        yield task_of(record)
        async for update in self._updates(record, decisions=decisions):
            yield update

    async def on_subscribe_to_task(  # type: ignore[override]
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncIterator[Any]:
        record = await self._task(context, params.id)
        yield task_of(record)
        if record.status in TERMINAL_STATES or record.status is ExecutionState.SUSPENDED:
            return
        async for update in self._updates(record, decisions=len(record.reviews)):
            yield update

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        return task_of(await self._task(context, params.id))

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        record = await self._task(context, params.id)
        await self._require(context, CANCEL)
        caller, _ = self._who(context)
        try:
            record = await self.engine.cancel(record.execution_id, decided_by=caller.identity)
        except Conflict as exc:
            raise TaskNotCancelableError(message=str(exc)) from None
        return task_of(record)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        _, agent = self._who(context)
        raise UnsupportedOperationError(
            message=f"listing tasks is the client API's: GET /executions?agent={agent}"
        )

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        self._no_push()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        self._no_push()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        self._no_push()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        self._no_push()

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError(message="this Agent has only its public card")

    @staticmethod
    def _no_push() -> NoReturn:
        raise PushNotificationNotSupportedError(
            message="no push notifications: stream (message/stream) or resubscribe (tasks/resubscribe)"
        )


def a2a_routes(
    engine: Orchestrator,
    guard: Callable[[Handler], Handler],
    *,
    require: Require,
    allowed: Allowed,
    caller: Callable[[Request], Caller],
    created: Callable[[], None] = lambda: None,
    send_wait_s: float = SEND_WAIT_S,
) -> list[Route]:
    """The A2A routes of every registered Agent, each request authorized as the client API's."""
    quiet_client_faults()
    handler = ExecutionTasks(engine, allowed=allowed, created=created, send_wait_s=send_wait_s)
    dispatcher = JsonRpcDispatcher(
        request_handler=handler, context_builder=_Context(), enable_v0_3_compat=True
    )

    async def agent_of(request: Request) -> Response | None:
        """None when the caller may invoke the path's Agent and it is registered; else the answer."""
        project, name = request.path_params["project_id"], request.path_params["agent"]
        await require(caller(request), on_agents(INVOKE, project, name))
        if engine.registry.get(f"{project}/{name}") is None:
            return JSONResponse(
                {"error": "agent_not_found", "detail": f"no Agent {name!r} in project {project!r}"},
                status_code=404,
            )
        return None

    async def card(request: Request) -> Response:
        refused = await agent_of(request)
        if refused is not None:
            return refused
        project, name = request.path_params["project_id"], request.path_params["agent"]
        reg = engine.registry.get(f"{project}/{name}")
        assert reg is not None
        url = f"{str(request.base_url).rstrip('/')}/a2a/{project}/{name}/"
        return JSONResponse(agent_card_to_dict(agent_card(reg, url=url)))

    async def rpc(request: Request) -> Response:
        refused = await agent_of(request)
        if refused is not None:
            return refused
        # The SDK reads the body whole: capped here as /invoke's is, then handed on as the one message.
        body = await read_request_body(request, limit=MAX_BODY_BYTES)
        if body is None:
            return JSONResponse(too_large(MAX_BODY_BYTES), status_code=413)

        sent = False

        async def replay() -> Any:
            nonlocal sent
            if (
                sent
            ):  # after the body, the connection's own messages (an SSE response waits for the disconnect)
                return await request.receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await dispatcher.handle_requests(Request(request.scope, receive=replay))

    return [
        Route(PREFIX + AGENT_CARD_WELL_KNOWN_PATH, guard(card), methods=["GET"]),
        Route(PREFIX + "/", guard(rpc), methods=["POST"]),
        Route(PREFIX, guard(rpc), methods=["POST"]),
    ]


__all__ = ["PREFIX", "ExecutionTasks", "a2a_routes"]
