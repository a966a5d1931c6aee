"""The knowledge routes' verbs (servers/oe_knowledge.py): writing takes `update agents`, more than invoke."""

from __future__ import annotations

import pytest

from agent_runtime.oe.client_auth import INVOKE, KNOWLEDGE_READ, KNOWLEDGE_WRITE, on_agents, route_need

pytestmark = pytest.mark.unit
PATH = "/api/v1/projects/team-a/agents/bot/knowledge/documents"


@pytest.mark.parametrize(("method", "permission"), [("POST", KNOWLEDGE_WRITE), ("DELETE", KNOWLEDGE_WRITE),
                                                    ("GET", KNOWLEDGE_READ)])  # fmt: skip
def test_each_method_needs_its_verb_on_the_agent(method: str, permission: object) -> None:
    need = route_need(method, PATH)
    assert need is not None and need.kind == "agent" and need.permission == permission


def test_writing_is_update_on_the_agent_itself_not_invoke() -> None:
    spec = on_agents(KNOWLEDGE_WRITE, "team-a", "bot").spec()
    assert spec == {"verb": "update", "group": "agentengine.io", "resource": "agents", "namespace": "team-a",
                    "name": "bot"}  # fmt: skip
    assert KNOWLEDGE_WRITE != INVOKE
    assert route_need("PUT", PATH) is None and route_need("POST", PATH + "/x") is None
