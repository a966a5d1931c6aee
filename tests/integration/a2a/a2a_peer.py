"""An A2A agent served by the official SDK (a2a-sdk's JSON-RPC routes and DefaultRequestHandlerV2), run as
its own process on loopback: the remote agent an `agent` Connector calls.

Its card has four skills; the message's `metadata.skill` says which one a call means (what the Tool Pod's
`agent` connector sends):
- `lookup` (tag `read-only`): completes with a text artifact naming what it was asked;
- `transfer` (no tag: sensitive): completes, and appends a line to the ledger (a side effect to count);
- `clarify`: ends `input-required` with a question;
- `explode`: ends `failed` with a reason.
Every request must carry `Authorization: Bearer <A2A_PEER_TOKEN>` (401 otherwise), the card's too;
with A2A_PEER_TOKEN unset or empty the peer is open (the operator's discovery test, without a Secret).

Run: `python -m tests.integration.a2a.a2a_peer PORT LEDGER` (A2A_PEER_TOKEN in the environment).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

TOKEN_ENV = "A2A_PEER_TOKEN"
SKILLS = (
    ("lookup", "Looks an item up", ["read-only"]),
    ("transfer", "Moves money between accounts", ["payments"]),
    ("clarify", "Asks a question back", ["questions"]),
    ("explode", "Always fails", ["failures"]),
)


def card(url: str) -> AgentCard:
    return AgentCard(
        name="ledger-peer",
        description="A loopback A2A agent for Agent Engine's tests",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=i, name=i, description=d, tags=t) for i, d, t in SKILLS],
    )


def _text(value: str) -> Part:
    return Part(text=value)


def _asked(message: Message) -> str:
    found: list[str] = []
    for part in message.parts:
        if part.HasField("data"):
            found.append(json.dumps(json_format.MessageToDict(part.data), sort_keys=True))
        elif part.text:
            found.append(part.text)
    return " ".join(found)


class PeerExecutor(AgentExecutor):
    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        metadata: dict[str, Any] = json_format.MessageToDict(message.metadata) if message.metadata else {}
        skill = str(metadata.get("skill", ""))
        asked = _asked(message)
        task_id, context_id = context.task_id or "", context.context_id or ""
        await event_queue.enqueue_event(
            Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[message],
            )
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        if skill == "clarify":
            await updater.requires_input(updater.new_agent_message([_text("Which account do you mean?")]))
        elif skill == "explode" or skill not in {s[0] for s in SKILLS}:
            await updater.failed(updater.new_agent_message([_text(f"skill {skill!r} broke on purpose")]))
        else:
            if skill == "transfer":
                with self.ledger.open("a") as ledger:
                    ledger.write(f"transfer {asked}\n")
                # The message id each transfer came with: an `agent` connector's is its call's (issue 38).
                with self.ledger.with_name(self.ledger.name + ".messages").open("a") as ids:
                    ids.write(f"{message.message_id}\n")
            await updater.add_artifact([_text(f"{skill} done: {asked}")], name="result")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


class Bearer(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: Any) -> Response:
        token = os.environ.get(TOKEN_ENV, "")
        if token and request.headers.get("authorization") != f"Bearer {token}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return await call_next(request)  # type: ignore[no-any-return]


def app(port: int, ledger: Path) -> Starlette:
    agent_card = card(f"http://127.0.0.1:{port}/")
    handler = DefaultRequestHandlerV2(
        agent_executor=PeerExecutor(ledger), task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    routes = [*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, rpc_url="/")]
    application = Starlette(routes=routes)
    application.add_middleware(Bearer)
    return application


if __name__ == "__main__":
    port, ledger_path = int(sys.argv[1]), Path(sys.argv[2])
    uvicorn.run(app(port, ledger_path), host="127.0.0.1", port=port, log_level="warning")
