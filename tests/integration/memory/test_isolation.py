"""One Agent can never read, list or guess another's memories: two Memory servers (two Agents, two tokens)
on the very same store, a SQLite file or a MongoDB database, over the real HTTP API."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.memory.launched import MemoryServer, memory_process

SECRET = "the launch date is 14 March"


@pytest.fixture(params=["sqlite", "mongodb"])
def two_agents(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[MemoryServer, MemoryServer]]:
    if request.param == "sqlite":
        shared = {"MEMORY_STORE_TYPE": "sqlite", "MEMORY_SQLITE_PATH": str(tmp_path / "shared.db")}
    else:
        uri = request.getfixturevalue("ferretdb_uri")
        shared = {
            "MEMORY_STORE_TYPE": "mongodb",
            "MEMORY_MONGODB_URI": uri,
            "MEMORY_MONGODB_DATABASE": f"shared_{uuid.uuid4().hex[:12]}",
        }
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    with (
        memory_process(
            tmp_path / "a", app_id="team-a.planner", token="token-of-agent-a-000", extra=shared
        ) as a,
        memory_process(
            tmp_path / "b", app_id="team-b.intruder", token="token-of-agent-b-000", extra=shared
        ) as b,
    ):
        yield a, b


def test_another_agent_cannot_read_list_search_guess_or_delete(
    two_agents: tuple[MemoryServer, MemoryServer],
) -> None:
    agent_a, agent_b = two_agents
    scope = {"namespace": "plans", "org_id": "acme", "user_id": "ada"}
    kinds = {
        "semantic": {},
        "episodic": {"session_id": "s-1"},
        "taxonomic": {},
    }
    with agent_a.client() as a, agent_b.client() as b:
        for kind, extra in kinds.items():
            written = a.post(
                f"/memory/{kind}/records", json={**scope, "id": "plan-1", "content": SECRET, **extra}
            )
            assert written.status_code == 201, written.text

        for kind in kinds:
            # Guessing the exact key: not found, exactly as a record that never existed.
            guessed = b.get(f"/memory/{kind}/records/plan-1", params=scope)
            assert guessed.status_code == 404 and guessed.json()["error"] == "record_not_found"
            assert SECRET not in guessed.text
            assert b.post(f"/memory/{kind}/search", json={**scope, "query": SECRET}).json()["results"] == []
            assert b.post(f"/memory/{kind}/search", json={**scope}).json()["results"] == []
            assert b.post(
                f"/memory/{kind}/search", json={**scope, "namespace": None, "namespace_prefix": "plans"}
            ).json() == {"results": []}
            assert b.post(f"/memory/{kind}/list", json=scope).json()["results"] == []
            assert b.post(f"/memory/{kind}/namespaces", json={"org_id": "acme", "user_id": "ada"}).json() == {
                "namespaces": []
            }
            # Deleting the guessed key is a no-op for A's record.
            assert b.delete(f"/memory/{kind}/records/plan-1", params=scope).status_code == 204
        summary = b.post("/memory/episodic/summarize", json={**scope, "session_id": "s-1"}).json()
        assert summary["count"] == 0 and SECRET not in summary["summary"]
        assert b.post("/memory/taxonomic/subtree", json=scope).json()["results"] == []
        moved = b.post("/memory/taxonomic/records/plan-1/move", json={**scope, "parent_id": None})
        assert moved.status_code == 404

        # B writing the same key makes B's own record; A's is untouched.
        mine = b.post("/memory/semantic/records", json={**scope, "id": "plan-1", "content": "B's own note"})
        assert mine.status_code == 201 and mine.json()["created"] is True
        for kind in kinds:
            kept = a.get(f"/memory/{kind}/records/plan-1", params=scope)
            assert kept.status_code == 200 and kept.json()["content"] == SECRET
        hits = a.post("/memory/semantic/search", json={**scope, "query": "note"}).json()["results"]
        assert [hit["content"] for hit in hits] == [SECRET]

    # Each server takes only its own Agent's token.
    wrong = httpx.post(
        f"{agent_b.base_url}/memory/semantic/search",
        json={**scope, "query": "x"},
        headers={"authorization": f"Bearer {agent_a.token}"},
    )
    assert wrong.status_code == 401


def test_users_and_orgs_of_one_agent_are_apart(two_agents: tuple[MemoryServer, MemoryServer]) -> None:
    agent_a, _ = two_agents
    with agent_a.client() as a:
        ada = {"namespace": "prefs", "org_id": "acme", "user_id": "ada"}
        a.post("/memory/semantic/records", json={**ada, "id": "p", "content": "likes tea"})
        for other in (
            {**ada, "user_id": "bob"},
            {**ada, "org_id": "globex"},
            {**ada, "namespace": "prefs.sub"},
        ):
            assert a.get("/memory/semantic/records/p", params=other).status_code == 404
            assert a.post("/memory/semantic/search", json={**other, "query": "tea"}).json()["results"] == []
