"""The Memory server over its real HTTP API, started by the launcher (RUNNER_MODE=memory) on loopback."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.memory.launched import TOKEN, MemoryServer, memory_process

T0 = 1_760_000_000.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryServer]:
    with memory_process(tmp_path_factory.mktemp("memory")) as running:
        yield running


@pytest.fixture
def http(server: MemoryServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture
def scope() -> dict[str, str]:
    """A scope of its own per test, so tests sharing the server never see each other's records."""
    return {"namespace": "notes", "org_id": "org-1", "user_id": f"user-{uuid.uuid4().hex[:8]}"}


def write(
    http: httpx.Client, kind: str, scope: dict[str, str], content: str, **fields: Any
) -> dict[str, Any]:
    response = http.post(f"/memory/{kind}/records", json={**scope, "content": content, **fields})
    assert response.status_code in (200, 201), response.text
    return response.json()["record"]


def search(http: httpx.Client, kind: str, scope: dict[str, str], **body: Any) -> list[dict[str, Any]]:
    response = http.post(f"/memory/{kind}/search", json={**scope, **body})
    assert response.status_code == 200, response.text
    return response.json()["results"]


# access


def test_probes_are_open_and_everything_else_needs_the_token(server: MemoryServer) -> None:
    assert httpx.get(f"{server.base_url}/healthz").json() == {"status": "alive"}
    assert httpx.get(f"{server.base_url}/readyz").json() == {"status": "ready"}
    assert httpx.get(f"{server.base_url}/metrics").status_code == 200
    body = {"namespace": "n", "content": "x"}
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Basic {TOKEN}"}):
        answer = httpx.post(f"{server.base_url}/memory/semantic/records", json=body, headers=headers)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer" and answer.content == b""


# semantic


def test_semantic_write_get_replace_delete(http: httpx.Client, scope: dict[str, str]) -> None:
    created = http.post(
        "/memory/semantic/records",
        json={**scope, "id": "seat", "content": "prefers window seats", "metadata": {"topic": "travel"}},
    )
    assert created.status_code == 201 and created.json()["created"] is True
    record = created.json()["record"]
    assert record["id"] == "seat" and record["embedding_model"] == "all-MiniLM-L6-v2/onnx-int8"
    params = scope
    got = http.get("/memory/semantic/records/seat", params=params)
    assert got.status_code == 200 and got.json()["content"] == "prefers window seats"

    replaced = http.post(
        "/memory/semantic/records", json={**scope, "id": "seat", "content": "prefers aisle seats"}
    )
    assert replaced.status_code == 200 and replaced.json()["created"] is False
    again = replaced.json()["record"]
    assert again["created_at"] == record["created_at"] and again["updated_at"] >= record["updated_at"]
    assert again["metadata"] == {}

    assert http.delete("/memory/semantic/records/seat", params=params).status_code == 204
    assert http.delete("/memory/semantic/records/seat", params=params).status_code == 204  # idempotent
    missing = http.get("/memory/semantic/records/seat", params=params)
    assert missing.status_code == 404 and missing.json()["error"] == "record_not_found"


def test_semantic_search_by_meaning_with_scores_filters_and_min_score(
    http: httpx.Client, scope: dict[str, str]
) -> None:
    facts = {
        "seat": ("The user prefers window seats when flying", {"topic": "travel", "year": 2024}),
        "food": ("The user is allergic to peanuts and shellfish", {"topic": "food", "year": 2023}),
        "pet": ("The user has a dog called Rex", {"topic": "home", "year": 2024}),
        "car": ("The user drives an electric car to work", {"topic": "travel", "year": 2022}),
    }
    for key, (content, meta) in facts.items():
        write(http, "semantic", scope, content, id=key, metadata=meta)

    hits = search(http, "semantic", scope, query="which seat does the user want on a plane?", top_k=2)
    assert hits[0]["id"] == "seat"
    assert len(hits) == 2 and hits[0]["score"] > hits[1]["score"]

    travel = search(http, "semantic", scope, query="food allergy", filter={"topic": "travel"})
    assert {hit["id"] for hit in travel} == {"seat", "car"}
    recent = search(
        http, "semantic", scope, query="user", filter={"year": {"$gte": 2024}, "topic": {"$ne": "home"}}
    )
    assert [hit["id"] for hit in recent] == ["seat"]
    either = search(
        http, "semantic", scope, query="user", filter={"$or": [{"topic": "food"}, {"topic": "home"}]}
    )
    assert {hit["id"] for hit in either} == {"food", "pet"}
    assert search(http, "semantic", scope, query="peanut allergy", min_score=0.99) == []

    newest_first = search(http, "semantic", scope, filter={"topic": "travel"})
    assert [hit["id"] for hit in newest_first] == ["car", "seat"] and newest_first[0]["score"] is None


def test_caller_embeddings_live_in_their_own_space(http: httpx.Client, scope: dict[str, str]) -> None:
    write(http, "semantic", scope, "north", id="n", embedding=[0, 1, 0], embedding_model="mine")
    write(http, "semantic", scope, "east", id="e", embedding=[1, 0, 0], embedding_model="mine")
    write(http, "semantic", scope, "north text", id="t")  # the server's model
    hits = search(http, "semantic", scope, embedding=[0.1, 1, 0], embedding_model="mine", top_k=5)
    assert [hit["id"] for hit in hits] == ["n", "e"]
    wrong = http.post("/memory/semantic/search", json={**scope, "embedding": [1, 0, 0]})
    assert wrong.status_code == 400
    assert wrong.json()["detail"][0]["field"] == "embedding" and "384" in wrong.json()["detail"][0]["problem"]


def test_namespaces_and_prefix_search(http: httpx.Client, scope: dict[str, str]) -> None:
    base = {"org_id": scope["org_id"], "user_id": scope["user_id"]}
    for ns in ("project", "project.alpha", "project.alpha.notes", "projects", "other"):
        write(http, "semantic", {**base, "namespace": ns}, f"meeting notes for {ns}")
    names = http.post("/memory/semantic/namespaces", json={**base, "prefix": "project"}).json()["namespaces"]
    assert names == ["project", "project.alpha", "project.alpha.notes"]
    hits = search(http, "semantic", {**base, "namespace_prefix": "project.alpha"}, query="meeting notes")
    assert sorted(hit["namespace"] for hit in hits) == ["project.alpha", "project.alpha.notes"]


# episodic


def test_episodes_window_order_and_summary(http: httpx.Client, scope: dict[str, str]) -> None:
    episodes = scope | {"namespace": "episodes"}
    lines = [
        ("user", "My order 1234 arrived damaged, the box was crushed"),
        ("assistant", "Sorry about the damaged order; I can send a replacement or refund the order"),
        ("user", "A replacement please, same address as the order"),
        ("assistant", "Replacement for order 1234 booked, arriving Friday"),
        ("user", "Thanks!"),
    ]
    for i, (role, text) in enumerate(lines):
        write(http, "episodic", episodes, text, session_id="s-1", role=role, occurred_at=T0 + 60 * i)
    write(http, "episodic", episodes, "another session entirely", session_id="s-2", occurred_at=T0 + 30)

    window = http.post(
        "/memory/episodic/list",
        json={**episodes, "session_id": "s-1", "since": T0 + 60, "until": T0 + 240, "order": "asc"},
    ).json()["results"]
    assert [event["content"] for event in window] == [text for _, text in lines[1:4]]
    latest = http.post("/memory/episodic/list", json={**episodes, "session_id": "s-1", "limit": 2}).json()[
        "results"
    ]
    assert [event["occurred_at"] for event in latest] == [T0 + 240, T0 + 180]

    answer = http.post(
        "/memory/episodic/summarize", json={**episodes, "session_id": "s-1", "max_highlights": 2}
    )
    assert answer.status_code == 200, answer.text
    summary = answer.json()
    assert summary["count"] == 5 and summary["roles"] == {"user": 3, "assistant": 2}
    assert summary["first_at"] == T0 and summary["last_at"] == T0 + 240 and summary["truncated"] is False
    assert len(summary["highlights"]) == 2 and "order" in summary["summary"]
    assert "5 events in session s-1" in summary["summary"]

    hits = search(http, "episodic", episodes, query="damaged box", session_id="s-1", top_k=1)
    assert hits[0]["content"] == lines[0][1]


# taxonomic


def test_category_tree_put_move_subtree_classify_delete(http: httpx.Client, scope: dict[str, str]) -> None:
    cats = scope | {"namespace": "support"}
    write(http, "taxonomic", cats, "Customer support requests", id="support")
    write(http, "taxonomic", cats, "Billing, invoices and payments", id="billing", parent_id="support")
    write(http, "taxonomic", cats, "Shipping, delivery and parcels", id="shipping", parent_id="support")
    write(http, "taxonomic", cats, "Refunds of payments", id="refunds", parent_id="billing")

    tree = http.post("/memory/taxonomic/subtree", json=cats).json()["results"]
    assert [(n["id"], n["depth"]) for n in tree] == [
        ("support", 0),
        ("billing", 1),
        ("refunds", 2),
        ("shipping", 1),
    ]
    assert tree[2]["path"] == ["support", "billing", "refunds"]
    below = http.post("/memory/taxonomic/subtree", json={**cats, "root_id": "billing"}).json()["results"]
    assert [n["id"] for n in below] == ["billing", "refunds"]
    shallow = http.post("/memory/taxonomic/subtree", json={**cats, "max_depth": 1}).json()["results"]
    assert [n["id"] for n in shallow] == ["support", "billing", "shipping"]

    moved = http.post("/memory/taxonomic/records/refunds/move", json={**cats, "parent_id": "shipping"})
    assert moved.status_code == 200 and moved.json()["path"] == ["support", "shipping", "refunds"]
    cycle = http.post("/memory/taxonomic/records/shipping/move", json={**cats, "parent_id": "refunds"})
    assert cycle.status_code == 409 and cycle.json()["error"] == "cycle"
    self_parent = http.post(
        "/memory/taxonomic/records/billing", json={**cats, "content": "x", "parent_id": "billing"}
    )
    assert self_parent.status_code in (404, 405)  # not a route: writes go to /records
    loop = http.post(
        "/memory/taxonomic/records", json={**cats, "id": "billing", "content": "x", "parent_id": "billing"}
    )
    assert loop.status_code == 409 and loop.json()["error"] == "cycle"
    orphan = http.post("/memory/taxonomic/records", json={**cats, "content": "x", "parent_id": "nowhere"})
    assert orphan.status_code == 400 and orphan.json()["detail"][0]["field"] == "parent_id"

    best = search(http, "taxonomic", cats, query="my parcel delivery is late", top_k=1)
    assert best[0]["id"] == "shipping" and best[0]["path"] == ["support", "shipping"]
    got = http.get("/memory/taxonomic/records/refunds", params=cats).json()
    assert got["path"] == ["support", "shipping", "refunds"] and got["parent_id"] == "shipping"

    refused = http.delete("/memory/taxonomic/records/shipping", params=cats)
    assert refused.status_code == 409 and refused.json()["error"] == "has_children"
    assert (
        http.delete("/memory/taxonomic/records/shipping", params={**cats, "cascade": "true"}).status_code
        == 204
    )
    left = http.post("/memory/taxonomic/subtree", json=cats).json()["results"]
    assert [n["id"] for n in left] == ["support", "billing"]


# bad input: a clear 4xx naming the problem, and nothing stored


BAD_WRITES = [
    ({"content": "x"}, 400, "namespace"),
    ({"namespace": "", "content": "x"}, 400, "namespace"),
    ({"namespace": "a..b", "content": "x"}, 400, "namespace"),
    ({"namespace": "n", "content": ""}, 400, "content"),
    ({"namespace": "n", "content": "   "}, 400, "content"),
    ({"namespace": "n", "content": "x" * 40_000}, 400, "content"),
    ({"namespace": "n", "content": "x" * 10_000_000}, 413, "body"),
    ({"namespace": "n", "content": "x", "namspace": "typo"}, 400, "namspace"),
    ({"namespace": "n", "content": "x", "id": "has space"}, 400, "id"),
    ({"namespace": "n", "content": "x", "session_id": "s"}, 400, "session_id"),
    ({"namespace": "n", "content": "x", "parent_id": "p"}, 400, "parent_id"),
    ({"namespace": "n", "content": "x", "metadata": "not an object"}, 400, "metadata"),
    ({"namespace": "n", "content": "x", "embedding": [0, 0]}, 400, "embedding"),
    ({"namespace": "n", "content": "x", "embedding": [1.0], "embed": False}, 400, "embed"),
]


@pytest.mark.parametrize(("body", "status", "names"), BAD_WRITES)
def test_bad_writes_are_refused_and_store_nothing(
    http: httpx.Client, scope: dict[str, str], body: dict[str, Any], status: int, names: str
) -> None:
    who = {"org_id": scope["org_id"], "user_id": scope["user_id"]}
    answer = http.post("/memory/semantic/records", json={**who, **body})
    assert answer.status_code == status, answer.text
    payload = answer.json()
    assert payload["error"] in ("invalid_request", "body_too_large")
    assert names in str(payload["detail"])
    assert http.post("/memory/semantic/namespaces", json=who).json()["namespaces"] == []


BAD_SEARCHES = [
    ({"namespace": "n", "query": "q", "top_k": 0}, "top_k"),
    ({"namespace": "n", "query": "q", "top_k": 100_000}, "top_k"),
    ({"query": "q"}, "namespace"),
    ({"namespace": "n", "namespace_prefix": "n", "query": "q"}, "namespace"),
    ({"namespace": "n", "query": "q", "filter": {"$where": "1"}}, "filter"),
    ({"namespace": "n", "query": "q", "filter": {"year": {"$regex": "x"}}}, "filter.year.$regex"),
    ({"namespace": "n", "query": "q", "filter": {"year": {"$gt": [1]}}}, "filter.year.$gt"),
    ({"namespace": "n", "query": "q", "filter": {"$or": []}}, "filter.$or"),
    ({"namespace": "n", "query": "q", "filter": {"a": {"b": 1}}}, "filter.a"),
    ({"namespace": "n", "query": "q", "filter": []}, "filter"),
    ({"namespace": "n", "query": "q", "session_id": "s"}, "session_id"),
    ({"namespace": "n", "query": "q", "embedding": [1.0]}, "query or embedding"),
]


@pytest.mark.parametrize(("body", "names"), BAD_SEARCHES)
def test_bad_searches_name_the_problem(http: httpx.Client, body: dict[str, Any], names: str) -> None:
    answer = http.post("/memory/semantic/search", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_request" and names in str(answer.json()["detail"])


def test_unknown_kind_bad_json_and_bad_ids(http: httpx.Client) -> None:
    for method, path in (
        ("POST", "/memory/procedural/records"),
        ("POST", "/memory/x/search"),
        ("GET", "/memory/y/records/a"),
    ):
        answer = http.request(
            method, path, json={"namespace": "n", "content": "x"}, params={"namespace": "n"}
        )
        assert answer.status_code == 404 and answer.json()["error"] == "unknown_kind"
        assert "semantic, episodic, taxonomic" in answer.json()["detail"]
    garbled = http.post(
        "/memory/semantic/records", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert garbled.status_code == 400 and garbled.json()["error"] == "invalid_request"
    no_scope = http.get("/memory/semantic/records/abc")
    assert no_scope.status_code == 400 and no_scope.json()["detail"][0]["field"] == "namespace"
    cascade = http.delete("/memory/semantic/records/abc", params={"namespace": "n", "cascade": "maybe"})
    assert cascade.status_code == 400 and cascade.json()["detail"][0]["field"] == "cascade"


def test_metrics_count_operations_by_kind_and_outcome(server: MemoryServer, http: httpx.Client) -> None:
    http.post("/memory/semantic/search", json={"namespace": "n", "query": "q", "top_k": 0})
    text = httpx.get(f"{server.base_url}/metrics").text
    assert (
        'agent_runtime_memory_operations_total{component="memory",kind="semantic",operation="search",outcome="client_error"}'
        in text
    )
    assert "agent_runtime_memory_operation_duration_seconds_bucket" in text


def test_log_holds_no_token_or_content(
    server: MemoryServer, http: httpx.Client, scope: dict[str, str]
) -> None:
    write(http, "semantic", scope, "the vault code is 4321")
    output = server.process.output()
    assert TOKEN not in output and "4321" not in output


def test_records_survive_a_restart(tmp_path: Path) -> None:
    scope = {"namespace": "kept", "user_id": "u"}
    with memory_process(tmp_path) as first, first.client() as http:
        write(http, "semantic", scope, "remember the milk", id="milk")
    with memory_process(tmp_path) as second, second.client() as http:
        hits = search(http, "semantic", scope, query="milk", top_k=1)
        assert [hit["id"] for hit in hits] == ["milk"]


def test_a_store_outage_is_a_503_and_the_server_carries_on(tmp_path: Path) -> None:
    from tests.integration.ferretdb import running_ferretdb

    ferret = running_ferretdb()
    uri = ferret.__enter__()
    settings = {
        "MEMORY_STORE_TYPE": "mongodb",
        "MEMORY_MONGODB_URI": f"{uri}?serverSelectionTimeoutMS=1500",
        "MEMORY_MONGODB_DATABASE": "outage",
    }
    scope = {"namespace": "n", "user_id": "u"}
    try:
        with memory_process(tmp_path, extra=settings) as server, server.client() as http:
            write(http, "semantic", scope, "before the outage")
            ferret.__exit__(None, None, None)
            answer = http.post("/memory/semantic/search", json={**scope, "query": "outage"})
            assert answer.status_code == 503 and answer.json()["error"] == "store_unavailable"
            assert "Memory server's log" in answer.json()["detail"]
            assert httpx.get(f"{server.base_url}/healthz").status_code == 200
    finally:
        ferret.__exit__(None, None, None)
