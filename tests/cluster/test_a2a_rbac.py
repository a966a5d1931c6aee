"""The A2A server per Agent (issue 38) authorizes as the client API, with the cluster's own identities on
a real API server (the world of test_client_rbac.py: alice edit in A, bob view in A, carol admin in B).

The official a2a-sdk client plays each person. Another team's identity (carol in A, bob who only views A)
is refused with the very Status body `/invoke` answers; alice may invoke and cancel but, without the
reviewer's role, her decision on a held task is refused naming `agents/approve`; carol, admin of B,
decides hers through A2A.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import CancelTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from google.protobuf import json_format, struct_pb2

from tests.cluster.test_client_rbac import World, _transfer, world  # noqa: F401 - the world fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]


def _data(value: Any) -> Part:
    part = Part(media_type="application/json")
    part.data.CopyFrom(json_format.ParseDict(value, struct_pb2.Value()))
    return part


def _message(part: Part, *, task_id: str = "") -> Message:
    return Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[part], task_id=task_id)


async def _send(on: World, who: str, agent: str, part: Part, *, task_id: str = "") -> Task:
    headers = {"authorization": f"Bearer {on.tokens[who]}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, f"{on.oe_url}/a2a/{agent}/").get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        try:
            request = SendMessageRequest(message=_message(part, task_id=task_id))
            answers = [answer async for answer in client.send_message(request)]
            return answers[0].task
        finally:
            await client.close()


async def _cancel(on: World, who: str, agent: str, task_id: str) -> Task:
    headers = {"authorization": f"Bearer {on.tokens[who]}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, f"{on.oe_url}/a2a/{agent}/").get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        try:
            return await client.cancel_task(CancelTaskRequest(id=task_id))
        finally:
            await client.close()


def test_a2a_calls_are_authorized_as_the_client_api(world: World) -> None:  # noqa: F811 - the fixture
    a, b = f"{world.ns_a}/loop", f"{world.ns_b}/loop"
    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {"message": {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}]}},
    }
    for who in ("carol", "bob"):  # another team's identity; one who may only read A
        with world.http(who) as http:
            refused = http.post(f"/a2a/{a}/", json=rpc)
            card = http.get(f"/a2a/{a}/.well-known/agent-card.json")
            invoke = http.post("/invoke", json={"agent": a, "input": "x"})
        assert refused.status_code == card.status_code == invoke.status_code == 403, refused.text
        assert refused.json() == card.json() == invoke.json()
        assert refused.json()["details"]["resource"] == "agents/invoke"
        assert world.user(who) in refused.json()["message"]

    # alice (edit in A): her held task is input-required; her decision needs the reviewer's role.
    held = asyncio.run(_send(world, "alice", a, _data(_transfer("a2a-alice"))))
    assert held.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    with pytest.raises(Exception, match="agents/approve") as refusal:
        asyncio.run(_send(world, "alice", a, _data({"decision": "approved"}), task_id=held.id))
    assert "agents/approve" in str(refusal.value)
    assert world.wait("alice", held.id, "suspended")["status"] == "suspended"
    cancelled = asyncio.run(_cancel(world, "alice", a, held.id))  # edit holds the invoker's cancel
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert world.wait("alice", held.id, "cancelled")["cancelled_by"]["username"] == world.user("alice")

    # carol (admin in B) decides her own Agent's held call through A2A: it runs, decided by her.
    mine = asyncio.run(_send(world, "carol", b, _data(_transfer("a2a-carol"))))
    assert mine.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    done = asyncio.run(_send(world, "carol", b, _data({"decision": "approved"}), task_id=mine.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    view = world.wait("carol", mine.id, "completed")
    assert view["reviews"][0]["decided_by"]["username"] == world.user("carol")
    # ... and alice, who may invoke A only, finds nothing of B's through A's path.
    with world.http("alice") as http:
        get = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": mine.id}}
        assert '"code":-32001' in http.post(f"/a2a/{a}/", json=get).text.replace(" ", "")
    for token in world.tokens.values():
        assert token not in world.oe.outputs()
