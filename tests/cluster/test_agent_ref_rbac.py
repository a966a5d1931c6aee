"""agentRef (issue 38) with the cluster's own identities on a real API server (the world of
test_client_rbac.py: alice edit in A, bob view in A, carol admin in B).

A's Agent names B's Agent and itself by reference. A child runs as the user who started its parent: alice
may invoke A, so her child of A runs as her; she may not invoke B, so her agentRef to B is refused by the
same SubjectAccessReview `/invoke` asks, and nothing of B starts; once she is made an editor of B too, the
same call starts a child of B, as her.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client

from tests.cluster.test_client_rbac import TTL_S, World, _bind, world  # noqa: F401 - the world fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]


def _calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def _with_agent_refs(on: World) -> None:
    """A's registration file, as the operator would publish it for spec.agentRefs; the OE reads it again."""
    path = on.oe.tmp / "registrations" / f"{on.ns_a}.loop.json"
    document = json.loads(path.read_text())
    document["agentRefs"] = [
        {"tool": "agent.b", "agent": f"{on.ns_b}/loop"},
        {"tool": "agent.a", "agent": f"{on.ns_a}/loop"},
    ]
    path.write_text(json.dumps(document))
    time.sleep(2.5)  # the OE reads its registrations directory every second


def _invoke(on: World, who: str, task: dict[str, Any]) -> str:
    with on.http(who) as http:
        started = http.post("/invoke", json={"agent": f"{on.ns_a}/loop", "input": task})
    assert started.status_code == 202, started.text
    return str(started.json()["execution_id"])


def _child(on: World, who: str, parent: str) -> str | None:
    with on.http(who) as http:
        records = http.get(f"/execution/{parent}/audit").json()["records"]
    ids = [(r.get("detail") or {}).get("child_execution_id") for r in records if r["kind"] == "tool"]
    return next((i for i in ids if i), None)


def test_an_agent_ref_runs_as_the_parents_user_and_is_refused_where_she_may_not_invoke(
    world: World,  # noqa: F811 - the fixture
) -> None:
    _with_agent_refs(world)
    alice = world.user("alice")
    work = _calls(("shout", {"text": "hi"}))

    mine = _invoke(world, "alice", _calls(("agent.a", {"input": work})))
    view = world.wait("alice", mine, "completed", "failed")
    assert view["status"] == "completed", view
    child = _child(world, "alice", mine)
    assert child is not None
    child_view = world.wait("alice", child, "completed")
    assert child_view["invoked_by"]["username"] == alice and child_view["user_id"] == alice
    assert child_view["parent"]["execution_id"] == mine

    refused = _invoke(world, "alice", _calls(("agent.b", {"input": work})))
    view = world.wait("alice", refused, "completed", "failed")
    (error,) = view["result"]["results"]
    assert "agent_ref_forbidden" in error["text"] or "agents/invoke" in error["text"], error
    assert alice in error["text"] and f"{world.ns_b}/loop" in error["text"]
    assert _child(world, "alice", refused) is None
    with world.http("carol") as http:  # B's admin sees every execution of B: none was started
        listed = http.get("/executions", params={"agent": f"{world.ns_b}/loop"}).json()["items"]
    assert listed == []

    # alice made an editor of B too: the same call now starts a child of B, as her.
    with world.cluster.api_client() as api:
        _bind(
            client.RbacAuthorizationV1Api(api),
            world.ns_b,
            name="alice-edit-b",
            role="edit",
            sa=(world.people, "alice"),
        )
    time.sleep(TTL_S + 1)  # the OE's decision cache
    allowed = _invoke(world, "alice", _calls(("agent.b", {"input": work})))
    view = world.wait("alice", allowed, "completed", "failed", timeout=60)
    assert view["status"] == "completed", view
    b_child = _child(world, "alice", allowed)
    assert b_child is not None
    b_view = world.wait("carol", b_child, "completed")
    assert b_view["agent"] == f"{world.ns_b}/loop" and b_view["invoked_by"]["username"] == alice
    assert b_view["result"] == {"results": [{"loud": "HI"}]}
