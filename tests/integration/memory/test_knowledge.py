"""The knowledge base over the Memory server's real HTTP API, started by the launcher on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.memory.knowledge_client import KnowledgeClient, KnowledgeRequestError
from agent_runtime.memory.knowledge_wire import IngestBody, KnowledgeSearchBody
from tests.integration.memory.launched import MemoryServer, memory_process

HANDBOOK = """# Handbook

## Refunds

Customers may ask for a refund within 30 days of purchase. Refunds go back to the original card.

## Shipping

Parcels ship from the Rotterdam warehouse every weekday. Express delivery takes one day.

## Security

Passwords are rotated every ninety days and never sent by email.
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryServer]:
    with memory_process(tmp_path_factory.mktemp("knowledge"), app_id="team-a.kb") as running:
        yield running


@pytest.fixture
def http(server: MemoryServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def ingest(http: httpx.Client, source: str, text: str, **fields: Any) -> dict[str, Any]:
    response = http.post("/knowledge/documents", json={"source": source, "text": text, **fields})
    assert response.status_code in (200, 201), response.text
    return response.json()


def search(http: httpx.Client, query: str, **fields: Any) -> list[dict[str, Any]]:
    response = http.post("/knowledge/search", json={"query": query, **fields})
    assert response.status_code == 200, response.text
    return response.json()["results"]


def test_ingest_search_get(http: httpx.Client) -> None:
    answer = ingest(http, "handbook.md", HANDBOOK, title="handbook.md", metadata={"team": "support"})
    assert answer["status"] == "created" and answer["chunks"] == 3
    hits = search(http, "how long do I have to return something for my money back", top_k=3)
    assert hits[0]["source"] == "handbook.md" and hits[0]["headings"] == ["Handbook", "Refunds"]
    assert hits[0]["score"] >= hits[-1]["score"] and hits[0]["metadata"] == {"team": "support"}
    got = http.get(f"/knowledge/chunks/{hits[0]['id']}")
    assert got.status_code == 200 and "30 days" in got.json()["text"] and got.json()["score"] is None


def test_reingest_unchanged_is_a_no_op_and_changed_replaces(http: httpx.Client) -> None:
    first = ingest(http, "policy.md", "# Policy\n\nThe office opens at nine.")
    again = ingest(http, "policy.md", "# Policy\n\nThe office opens at nine.")
    assert first["status"] == "created" and again == {**first, "status": "unchanged"}
    changed = ingest(http, "policy.md", "# Policy\n\nThe office opens at ten.\n\n## Parking\n\nBikes only.")
    assert changed["status"] == "replaced" and changed["chunks"] == 2 and changed["removed"] == 1
    hits = search(http, "when does the office open", top_k=10, filter={"source": "policy.md"})
    assert len(hits) == 2 and all(h["digest"] == changed["digest"] for h in hits)
    assert all("nine" not in h["text"] for h in hits)
    sources = {s["source"]: s for s in http.get("/knowledge/documents").json()["sources"]}
    assert sources["policy.md"]["chunks"] == 2
    forgotten = http.delete("/knowledge/documents", params={"source": "policy.md"})
    assert forgotten.json() == {"removed": 2}
    assert search(http, "when does the office open", filter={"source": "policy.md"}) == []


def test_filters_on_metadata(http: httpx.Client) -> None:
    ingest(http, "eu.md", "# Tax\n\nVAT is charged on every order.", metadata={"region": "eu"})
    ingest(http, "us.md", "# Tax\n\nSales tax depends on the state.", metadata={"region": "us"})
    hits = search(http, "which tax is charged", top_k=5, filter={"region": "us"})
    assert [h["source"] for h in hits] == ["us.md"]
    hits = search(http, "which tax is charged", top_k=5, filter={"region": {"$in": ["eu", "us"]}})
    assert {h["source"] for h in hits} == {"eu.md", "us.md"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"source": "a", "text": "   "}, "text"),
        ({"source": "", "text": "x"}, "source"),
        ({"source": "a", "text": "x", "metadata": {"source": "b"}}, "metadata.source"),
        ({"source": "a", "text": "x", "sorce": "b"}, "sorce"),
        ({"source": "a", "text": "x", "max_chars": 100}, "max_chars"),
    ],
)
def test_bad_ingest_names_the_field(http: httpx.Client, body: dict[str, Any], field: str) -> None:
    answer = http.post("/knowledge/documents", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_request"
    assert field in [problem["field"] for problem in answer.json()["detail"]]


def test_bad_search_and_get_name_the_field(http: httpx.Client) -> None:
    answer = http.post("/knowledge/search", json={"query": "x", "filter": {"a": {"$regex": "."}}})
    assert answer.status_code == 400 and answer.json()["detail"][0]["field"].startswith("filter")
    answer = http.get("/knowledge/chunks/not-an-id")
    assert answer.status_code == 400 and answer.json()["detail"][0]["field"] == "id"
    answer = http.get(f"/knowledge/chunks/k-{'0' * 16}-{'0' * 12}-0")
    assert answer.status_code == 404 and answer.json()["error"] == "chunk_not_found"
    assert http.delete("/knowledge/documents").json()["detail"][0]["field"] == "source"


def test_client_speaks_the_api(server: MemoryServer) -> None:
    async def run() -> None:
        client = KnowledgeClient(server.base_url, token=server.token)
        try:
            answer = await client.ingest(IngestBody(source="client.md", text="# FAQ\n\nThe cafe sells tea."))
            hits = await client.search(KnowledgeSearchBody(query="what drinks are sold", top_k=1))
            assert hits[0].source == "client.md" and answer.chunks == 1
            chunk = await client.get(hits[0].id)
            assert chunk is not None and chunk.text.endswith("The cafe sells tea.")
            assert await client.forget("client.md") == 1
            assert await client.get(hits[0].id) is None
        finally:
            await client.aclose()
        wrong = KnowledgeClient(server.base_url, token="not-the-token-0123456789")
        try:
            with pytest.raises(KnowledgeRequestError) as refused:
                await wrong.sources()
            assert refused.value.status == 401 and "not-the-token" not in str(refused.value)
        finally:
            await wrong.aclose()

    asyncio.run(run())


def test_knowledge_is_the_agents_own(tmp_path: Path) -> None:
    """Attacker: another Agent's Memory server on the same store file, and a user's memory routes, read
    nothing of this Agent's knowledge, whatever id, source or namespace they name."""
    with memory_process(tmp_path, app_id="team-a.owner") as owner, owner.client() as http:
        answer = ingest(http, "secret-plan.md", "# Plan\n\nThe launch is on the fifth of May.")
        chunk_id = search(http, "launch date")[0]["id"]
        database = tmp_path / "memory" / "memory.db"
        assert database.exists()
        # The memory routes of the same server: every namespace and user the knowledge might sit under.
        for namespace in ("chunks", "sources"):
            for user in ("", "team-a.owner/knowledge"):
                found = http.post(
                    "/memory/semantic/search",
                    json={"namespace": namespace, "user_id": user, "query": "launch date"},
                )
                assert found.status_code == 200 and found.json()["results"] == []
                got = http.get(f"/memory/semantic/records/{chunk_id}", params={"namespace": namespace})
                assert got.status_code == 404
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    shared = {"MEMORY_SQLITE_PATH": str(tmp_path / "memory" / "memory.db")}
    with memory_process(other_dir, app_id="team-b.thief", extra=shared) as thief, thief.client() as http:
        assert http.get(f"/knowledge/chunks/{chunk_id}").status_code == 404
        assert search(http, "launch date") == []
        assert http.get("/knowledge/documents").json()["sources"] == []
        again = ingest(http, "secret-plan.md", "# Plan\n\nNothing.")
        assert again["status"] == "created"  # its own document, not the owner's replaced
    (tmp_path / "owner-again").mkdir()
    again_dir = tmp_path / "owner-again"
    with memory_process(again_dir, app_id="team-a.owner", extra=shared) as owner, owner.client() as http:
        hits = search(http, "launch date")
        assert hits and "fifth of May" in hits[0]["text"] and hits[0]["digest"] == answer["digest"]


def test_oversized_documents_are_refused_before_any_embedding(http: httpx.Client) -> None:
    too_long = http.post("/knowledge/documents", json={"source": "big.md", "text": "word " * 90_000})
    assert too_long.status_code == 400 and too_long.json()["detail"][0]["field"] == "text"
    assert "split the document" in too_long.json()["detail"][0]["problem"]
    huge = http.post("/knowledge/documents", json={"source": "huge.md", "text": "x" * (3 * 1024 * 1024)})
    assert huge.status_code == 413 and huge.json()["error"] == "body_too_large"
    sources = {s["source"] for s in http.get("/knowledge/documents").json()["sources"]}
    assert not sources & {"big.md", "huge.md"}


def test_hybrid_and_vector_modes(http: httpx.Client) -> None:
    ingest(http, "ids.md", "# Headers\n\nThe console checks X-Zebra-Nonce on every form post.")
    hybrid = search(http, "x-zebra-nonce", top_k=3)
    assert hybrid[0]["source"] == "ids.md"  # the word ranking finds an identifier
    assert [h["score"] for h in hybrid] == sorted((h["score"] for h in hybrid), reverse=True)
    vector = search(http, "x-zebra-nonce", top_k=3, mode="vector", min_score=-1)
    assert all(-1 <= h["score"] <= 1 for h in vector)
    refused = http.post("/knowledge/search", json={"query": "x", "min_score": 0.5})
    assert refused.status_code == 400 and "mode=vector" in refused.text
    # A replaced document's old chunks leave the word ranking at once.
    ingest(http, "ids.md", "# Headers\n\nNothing about nonces any more.")
    assert all("Zebra" not in h["text"] for h in search(http, "x-zebra-nonce", top_k=10))
