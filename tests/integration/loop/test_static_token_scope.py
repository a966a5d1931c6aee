"""The static development token (issue 28) acts only in the namespaces it names; Kubernetes-style errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from tests.conftest import Process
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, Platform
from tests.providers.llm_peer import RunningLLMPeer


def test_the_static_token_acts_only_in_its_namespaces(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> None:
    platform = Platform(tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url)
    platform.start_tool_pod()
    platform.start_aer()
    platform.write_registrations()  # team-a/loop and team-b/other
    platform.start_oe(extra={"OE_CLIENT_TOKEN_NAMESPACES": "team-a"})
    calls = {"mode": "calls", "calls": [["shout", {"text": "hi"}]]}
    with platform.client() as client:
        mine = client.post("/invoke", json={"agent": AGENT, "input": calls})
        assert mine.status_code == 202, mine.text
        refused = client.post("/invoke", json={"agent": "team-b/other", "input": calls})
        assert refused.status_code == 403
        status = refused.json()
        assert status["kind"] == "Status" and status["details"]["namespace"] == "team-b"
        assert status["details"]["resource"] == "agents/invoke"
        assert CLIENT_TOKEN not in refused.text
        view = platform.wait(mine.json()["execution_id"])
        assert view["status"] == "completed" and view["invoked_by"]["username"] == "agent-engine:static-token"
        listed = client.get("/executions").json()["items"]
        assert {item["project_id"] for item in listed} == {"team-a"}
        assert client.get("/api/v1/projects/team-b/reviews").json() == {"items": [], "next_cursor": None}
    with httpx.Client(base_url=platform.oe_url, headers={"authorization": "Bearer wrong"}) as stranger:
        response = stranger.get("/executions")
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert response.json()["reason"] == "Unauthorized"
    assert CLIENT_TOKEN not in platform.outputs()
