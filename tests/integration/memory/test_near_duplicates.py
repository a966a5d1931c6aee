"""Near-duplicate memories on a real Memory server (launcher, SQLite, the packaged model) over HTTP: copies
of one fact written again and again cannot fill the top results, and distinct facts are never merged."""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.memory.launched import MemoryServer, memory_process
from tests.integration.memory.test_server import search, write

SEAT = "The user prefers window seats when flying."
# The same fact again, as an agent repeats it: case, punctuation, spacing, the fact said once more.
COPIES = [
    "the user prefers window seats when flying",
    "The user prefers window seats when flying!",
    "  The user prefers window seats, when flying.  ",
    "THE USER PREFERS WINDOW SEATS WHEN FLYING.",
]
OTHERS = [
    "The user drives an electric car to work.",
    "The user books hotels close to the airport.",
    "The user is allergic to peanuts and shellfish.",
    "The user likes to travel with carry-on luggage only.",
    "The user flies economy on short trips.",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryServer]:
    with memory_process(tmp_path_factory.mktemp("memory-dup")) as running:
        yield running


@pytest.fixture
def http(server: MemoryServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture
def scope() -> dict[str, str]:
    return {"namespace": "facts", "org_id": "org-1", "user_id": f"user-{uuid.uuid4().hex[:8]}"}


def test_copies_without_ids_merge_into_one_memory(http: httpx.Client, scope: dict[str, str]) -> None:
    first = http.post("/memory/semantic/records", json={**scope, "content": SEAT, "metadata": {"a": 1}})
    assert first.status_code == 201
    seat_id = first.json()["record"]["id"]
    for other in OTHERS:
        write(http, "semantic", scope, other)
    for i, copy in enumerate(COPIES):
        answer = http.post(
            "/memory/semantic/records", json={**scope, "content": copy, "metadata": {"copy": i}}
        )
        assert answer.status_code == 200 and answer.json()["created"] is False, copy
        assert answer.json()["record"]["id"] == seat_id
    merged = http.get(f"/memory/semantic/records/{seat_id}", params=scope).json()
    assert merged["content"] == COPIES[-1]  # the latest wording
    assert merged["metadata"] == {"a": 1, "copy": len(COPIES) - 1}
    assert merged["created_at"] == first.json()["record"]["created_at"]

    hits = search(http, "semantic", scope, query="which seat does the user like on a plane?", top_k=5)
    assert [hit["id"] for hit in hits].count(seat_id) == 1 and len(hits) == 5
    assert {hit["content"] for hit in hits[1:]} <= set(OTHERS)


def test_copies_with_their_own_ids_are_flagged_and_left_out_of_searches(
    http: httpx.Client, scope: dict[str, str]
) -> None:
    write(http, "semantic", scope, SEAT, id="seat")
    for other in OTHERS:
        write(http, "semantic", scope, other)
    for i, copy in enumerate(COPIES):
        record = write(http, "semantic", scope, copy, id=f"copy-{i}")
        assert record["id"] == f"copy-{i}" and record["duplicate_of"] == "seat"
    hits = search(http, "semantic", scope, query="which seat does the user like on a plane?", top_k=5)
    ids = [hit["id"] for hit in hits]
    assert ids[0] == "seat" and len(ids) == 5 and not any(i.startswith("copy-") for i in ids)

    # The original gone, its copies are what is left of the fact, and are found again.
    assert http.delete("/memory/semantic/records/seat", params=scope).status_code == 204
    hits = search(http, "semantic", scope, query="which seat does the user like on a plane?", top_k=5)
    assert hits[0]["id"].startswith("copy-")
    # A replacement of a record by its own id is no copy of itself.
    again = write(http, "semantic", scope, OTHERS[0] + " ", id="again")
    assert write(http, "semantic", scope, OTHERS[0], id="again")["duplicate_of"] == again["duplicate_of"]


def test_distinct_facts_that_share_their_words_are_not_merged(
    http: httpx.Client, scope: dict[str, str]
) -> None:
    pairs = [
        ("The meeting is at 3pm on Friday.", "The meeting is at 4pm on Friday."),
        ("The user is allergic to peanuts.", "The user is not allergic to peanuts."),
        ("The user prefers window seats when flying.", "The user prefers aisle seats when flying."),
        ("Alice is allergic to peanuts.", "Bob is allergic to peanuts."),
    ]
    for first, second in pairs:
        a, b = write(http, "semantic", scope, first), write(http, "semantic", scope, second)
        assert a["id"] != b["id"] and b["duplicate_of"] is None, (first, second)
    assert len(search(http, "semantic", scope, top_k=100)) == 2 * len(pairs)


def test_copies_written_at_once_are_one_memory(server: MemoryServer, scope: dict[str, str]) -> None:
    def post(i: int) -> int:
        with server.client() as client:
            body = {**scope, "content": COPIES[i % len(COPIES)]}
            return client.post("/memory/semantic/records", json=body).status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(post, range(16)))
    assert sorted(codes) == [200] * 15 + [201]
    with server.client() as client:
        assert len(search(client, "semantic", scope, top_k=100)) == 1


def test_episodes_repeat_freely(http: httpx.Client, scope: dict[str, str], tmp_path: Path) -> None:
    """An event that happens twice happened twice: episodic records are never merged."""
    for _ in range(3):
        write(http, "episodic", scope, "The user said hello.", session_id="s-1")
    assert len(search(http, "episodic", scope, session_id="s-1", top_k=10)) == 3
