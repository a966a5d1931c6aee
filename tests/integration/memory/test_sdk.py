"""The SDK's MemoryClient and the LangGraph store against a real Memory server on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from langgraph.store.base import BaseStore

from agent_runtime.sdk import (
    MemoryClient,
    MemoryConfigError,
    MemoryRequestError,
    MemoryUnavailable,
    RequestContext,
    shared_memory_client,
)
from agent_runtime.sdk.context import run_scope
from agent_runtime.sdk.memory_store import MemoryServerStore, decode_key, encode_key
from tests.conftest import free_port
from tests.integration.memory.launched import TOKEN, MemoryServer, memory_process


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryServer]:
    with memory_process(tmp_path_factory.mktemp("memory-sdk")) as running:
        yield running


def client_for(server: MemoryServer) -> MemoryClient:
    return MemoryClient.from_env({"AGENTIC_MEMORY_URL": server.base_url, "RUNTIME_TOKEN": TOKEN})


def test_from_env_names_what_is_missing(tmp_path: object) -> None:
    with pytest.raises(MemoryConfigError, match="AGENTIC_MEMORY_URL is not set"):
        MemoryClient.from_env({"RUNTIME_TOKEN": TOKEN})
    with pytest.raises(MemoryConfigError, match="RUNTIME_TOKEN_FILE"):
        MemoryClient.from_env({"AGENTIC_MEMORY_URL": "http://127.0.0.1:1"})
    with pytest.raises(MemoryConfigError, match="http"):
        MemoryClient.from_env({"AGENTIC_MEMORY_URL": "memory:8081", "RUNTIME_TOKEN": TOKEN})


def test_the_shared_client_is_made_once_from_the_environment(
    server: MemoryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_runtime.sdk.memory as module

    monkeypatch.setattr(module, "_shared", None)
    monkeypatch.setenv("AGENTIC_MEMORY_URL", server.base_url)
    monkeypatch.setenv("RUNTIME_TOKEN", TOKEN)
    monkeypatch.delenv("RUNTIME_TOKEN_FILE", raising=False)
    first = shared_memory_client()
    assert shared_memory_client() is first
    assert first.search_sync("anything", namespace="empty", user_id="nobody", org_id="") == []
    asyncio.run(first.aclose())


def test_semantic_calls_default_to_the_executions_user(server: MemoryServer) -> None:
    context = RequestContext(execution_id="e-1", session_id="s-1", user_id="ada", org_id="acme")

    async def scenario() -> None:
        memory = client_for(server)
        try:
            with run_scope(context, oe=None):
                written = await memory.write("prefers window seats", namespace="prefs", metadata={"k": 1})
                assert (written.org_id, written.user_id) == ("acme", "ada")
                await memory.write("allergic to peanuts", namespace="prefs", record_id="food")
                hits = await memory.search("where to sit on the plane", namespace="prefs", top_k=1)
                assert [hit.content for hit in hits] == ["prefers window seats"] and hits[0].score is not None
                assert (await memory.get("food", namespace="prefs")).content == "allergic to peanuts"
                await memory.delete("food", namespace="prefs")
                assert await memory.get("food", namespace="prefs") is None
                assert await memory.namespaces() == ["prefs"]
            # Outside the execution, another user's scope is empty.
            assert await memory.search("seats", namespace="prefs", user_id="bob", org_id="acme") == []
        finally:
            await memory.aclose()

    asyncio.run(scenario())


def test_episodes_and_categories(server: MemoryServer) -> None:
    context = RequestContext(execution_id="e-2", session_id="chat-9", user_id="eve", org_id="acme")

    async def scenario() -> None:
        memory = client_for(server)
        try:
            with run_scope(context, oe=None):
                for i, text in enumerate(["hello", "my parcel is late", "it was due Monday"]):
                    await memory.append_episode(text, role="user", occurred_at=1_760_000_000 + i)
                recent = await memory.recent_episodes(limit=2)
                assert [e.content for e in recent] == ["my parcel is late", "it was due Monday"]
                summary = await memory.summarize_episodes()
                assert summary.count == 3 and summary.session_id == "chat-9"

                await memory.put_category("Customer support", category_id="support")
                await memory.put_category(
                    "Shipping and delivery of parcels", category_id="shipping", parent_id="support"
                )
                await memory.put_category("Billing and invoices", category_id="billing", parent_id="support")
                best = await memory.categorize("where is my parcel?", top_k=1)
                assert [c.id for c in best] == ["shipping"] and best[0].path == ["support", "shipping"]
                moved = await memory.move_category("billing", parent_id="shipping")
                assert moved.path == ["support", "shipping", "billing"]
                tree = await memory.categories()
                assert [(c.id, c.depth) for c in tree] == [("support", 0), ("shipping", 1), ("billing", 2)]
                with pytest.raises(MemoryRequestError) as caught:
                    await memory.move_category("support", parent_id="billing")
                assert caught.value.status == 409 and caught.value.error == "cycle"
        finally:
            await memory.aclose()

    asyncio.run(scenario())


def test_errors_name_the_problem_and_never_the_token(server: MemoryServer) -> None:
    async def scenario() -> None:
        memory = client_for(server)
        try:
            with pytest.raises(MemoryRequestError) as caught:
                await memory.search("x", namespace="n", top_k=0, user_id="u", org_id="")
            assert caught.value.status == 400 and "top_k" in str(caught.value)
            with pytest.raises(ValueError, match="session_id"):
                await memory.append_episode("no session here")
        finally:
            await memory.aclose()
        wrong = MemoryClient(server.base_url, token="not-the-token")
        try:
            with pytest.raises(MemoryRequestError) as refused:
                await wrong.search("x", namespace="n")
            assert refused.value.status == 401 and "not-the-token" not in str(refused.value)
        finally:
            await wrong.aclose()
        gone = MemoryClient(f"http://127.0.0.1:{free_port()}", token=TOKEN)
        try:
            with pytest.raises(MemoryUnavailable) as unreachable:
                await gone.search("x", namespace="n")
            assert TOKEN not in str(unreachable.value)
        finally:
            await gone.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("key", ["plain-key", "with space/and slash", "b64.looks-encoded", "ключ"])
def test_langgraph_keys_round_trip(key: str) -> None:
    assert decode_key(encode_key(key)) == key


def test_langgraph_store_sync(server: MemoryServer) -> None:
    store: BaseStore = MemoryServerStore(client_for(server), index_fields=("text",))
    users = ("users", "ada", "memories")
    store.put(users, "m1", {"text": "Ada likes hiking in the mountains", "kind": "hobby"})
    store.put(users, "m 2", {"text": "Ada works as a nurse", "kind": "job"})
    store.put(("users", "bob", "memories"), "m1", {"text": "Bob likes hiking too", "kind": "hobby"})
    store.put(users, "raw", {"blob": 1}, index=False)

    item = store.get(users, "m 2")
    assert item is not None and item.key == "m 2" and item.namespace == users and item.value["kind"] == "job"
    hits = store.search(users, query="outdoor mountain walks", limit=1)
    assert [h.key for h in hits] == ["m1"] and hits[0].score is not None and hits[0].namespace == users
    everyone = store.search(("users",), query="hiking", filter={"kind": "hobby"}, limit=10)
    assert sorted(h.namespace[1] for h in everyone) == ["ada", "bob"]
    assert [h.key for h in store.search(users, filter={"blob": 1})] == ["raw"]
    assert store.list_namespaces(prefix=("users",)) == [
        ("users", "ada", "memories"),
        ("users", "bob", "memories"),
    ]
    assert store.list_namespaces(prefix=("users",), max_depth=2) == [("users", "ada"), ("users", "bob")]
    assert store.list_namespaces(suffix=("memories",), limit=1) == [("users", "ada", "memories")]
    store.delete(users, "m1")
    assert store.get(users, "m1") is None


def test_langgraph_store_async(server: MemoryServer) -> None:
    async def scenario() -> None:
        store = MemoryServerStore(client_for(server))
        try:
            ns = ("async-docs",)
            await store.aput(ns, "d1", {"text": "quarterly revenue grew by ten percent"})
            await store.aput(ns, "d2", {"text": "the office cat is called Whiskers"})
            hits = await store.asearch(ns, query="financial results", limit=1)
            assert [h.key for h in hits] == ["d1"]
            assert (await store.aget(ns, "d2")).value == {"text": "the office cat is called Whiskers"}
            await store.adelete(ns, "d2")
            assert await store.aget(ns, "d2") is None
            assert ("async-docs",) in await store.alist_namespaces()
        finally:
            await store.client.aclose()

    asyncio.run(scenario())
