"""The `knowledge` connector: a real Memory server (the launcher), mounted files and a loopback web page;
synced and searched by the connector directly, then by a model through the real OE, AER and Tool Pod."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from agent_runtime.connectors import build_bundle, write_bundle
from agent_runtime.connectors.builtin.knowledge import MAX_URL_BYTES
from agent_runtime.connectors.builtin.registry import create_connector, materialize_builtin
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError, ConnectorConfigError
from tests.conftest import REPO_ROOT, Process
from tests.integration.loop.harness import AGENT, LLM_KEY, RUNTIME_TOKEN, Platform, Tenant
from tests.integration.memory.launched import MemoryServer, start_memory
from tests.providers.llm_peer import Turn, running_llm_peer
from tests.providers.saas_peer import running_app

# The orders example's code is a generic tool loop over whatever tools the bundle gives it.
EXAMPLE = REPO_ROOT / "examples" / "orders-agent"
RUNBOOK = """# On-call runbook

## Paging

The on-call engineer is paged through the phone tree and must acknowledge within fifteen minutes.

## Rollback

A bad release is rolled back with `agentengine rollback`; the previous image stays cached for a week.
"""
PAGE = (
    "<html><head><style>p{}</style></head><body><h1>Office</h1>"
    "<p>The office closes at six on Fridays.</p></body></html>"
)


@pytest.fixture
def page() -> Iterator[str]:
    async def serve(_: Request) -> Response:
        return PlainTextResponse(PAGE, media_type="text/html")

    with running_app(Starlette(routes=[Route("/office", serve)])) as url:
        yield f"{url}/office"


def knowledge_dir(tmp_path: Path) -> Path:
    """A mounted ConfigMap as the kubelet lays it out: `..data` links and the keys beside them."""
    mount = tmp_path / "knowledge"
    data = mount / "..2026_12_02_10_00_00.000000001"
    data.mkdir(parents=True)
    (data / "runbook.md").write_text(RUNBOOK)
    (data / "logo.png").write_bytes(b"\x89PNG")
    (mount / "..data").symlink_to(data.name)
    (mount / "runbook.md").symlink_to("..data/runbook.md")
    return mount


def connector(mount: Path, page: str, memory: MemoryServer, **config: Any) -> BuiltinConnector:
    defs = materialize_builtin(
        name="handbook", type_name="knowledge", config={"paths": [str(mount)], "urls": [page], **config}
    )
    conn = create_connector(defs)
    conn._env = {"AGENTIC_MEMORY_URL": memory.base_url, "RUNTIME_TOKEN": memory.token}
    return conn


def test_config_is_checked_by_field() -> None:
    with pytest.raises(ConnectorConfigError) as bad:
        materialize_builtin(name="kb", type_name="knowledge", config={"paths": ["relative/dir"]})
    assert bad.value.field == "config.paths[0]"
    with pytest.raises(ConnectorConfigError) as bad:
        materialize_builtin(name="kb", type_name="knowledge", config={"url": "http://x"})
    assert bad.value.field == "config.url"
    defs = materialize_builtin(name="kb", type_name="knowledge", config={"urls": ["http://127.0.0.1:8/a"]})
    assert [t.name for t in defs.tools] == ["knowledge.search", "knowledge.get"]
    assert not any(t.sensitive for t in defs.tools)
    assert create_connector(defs).egress(defs.config) == [("127.0.0.1", 8)]


async def _search_until(
    conn: BuiltinConnector, arguments: dict[str, Any], seen: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """`knowledge.search` again until `seen(result)` (a background refresh has landed), for up to 20 s."""
    deadline = time.monotonic() + 20
    while True:
        found = await conn.execute("knowledge.search", arguments, env={})
        if seen(found) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)


def test_sync_search_get_change_and_removal(tmp_path: Path, spawn: Callable[..., Process], page: str) -> None:
    memory = start_memory(spawn, tmp_path, app_id="team-a.kb")
    mount = knowledge_dir(tmp_path)
    conn = connector(mount, page, memory, refresh_s=1)

    async def go() -> None:
        try:
            found = await conn.execute(
                "knowledge.search", {"query": "how fast must on-call acknowledge a page"}, env={}
            )
            first = found["results"][0]
            assert first["source"] == "file:knowledge/runbook.md" and "fifteen minutes" in first["text"]
            assert first["headings"] == ["On-call runbook", "Paging"]
            assert first["metadata"] == {"origin": "file", "connector": "handbook"}
            office = await conn.execute(
                "knowledge.search", {"query": "when does the office close", "top_k": 1}, env={}
            )
            assert office["results"][0]["source"] == page and "<p>" not in office["results"][0]["text"]
            got = await conn.execute("knowledge.get", {"id": first["id"]}, env={})
            assert got["text"] == first["text"]
            with pytest.raises(BuiltinToolError) as missing:
                await conn.execute("knowledge.get", {"id": f"k-{'0' * 16}-{'0' * 12}-0"}, env={})
            assert missing.value.category == "not_found"
            with pytest.raises(BuiltinToolError) as bad:
                await conn.execute("knowledge.search", {"query": "x", "filter": {"a": {"$regex": 1}}}, env={})
            assert bad.value.category == "invalid_arguments" and "filter" in bad.value.explanation

            # The ConfigMap changes: the runbook's new content replaces its old chunks. A refresh runs behind
            # the calls (only the first sync is waited for), so the change shows on a later call.
            (mount / "..data").resolve().joinpath("runbook.md").write_text(RUNBOOK.replace("fifteen", "five"))
            await asyncio.sleep(1.1)
            found = await _search_until(
                conn,
                {"query": "how fast must on-call acknowledge", "top_k": 10},
                lambda found: any("five minutes" in r["text"] for r in found["results"]),
            )
            runbook = [r for r in found["results"] if r["source"] == "file:knowledge/runbook.md"]
            assert runbook and all("fifteen" not in r["text"] for r in runbook)
            assert any("five minutes" in r["text"] for r in runbook)
            with pytest.raises(BuiltinToolError):
                await conn.execute("knowledge.get", {"id": first["id"]}, env={})  # the old chunk is gone

            # The file is removed: its chunks are forgotten; the page stays.
            (mount / "runbook.md").unlink()
            await asyncio.sleep(1.1)
            found = await _search_until(
                conn,
                {"query": "on-call acknowledge", "top_k": 10},
                lambda found: all(r["source"] == page for r in found["results"]),
            )
            assert {r["source"] for r in found["results"]} == {page}
        finally:
            await conn.aclose()

    asyncio.run(go())


def test_an_endless_url_is_read_only_up_to_its_bound(
    tmp_path: Path, spawn: Callable[..., Process], page: str
) -> None:
    """A URL whose body never ends is cut at MAX_URL_BYTES while it streams (read whole first, the sync
    would never end), not indexed; the other documents are."""
    sent = {"bytes": 0}

    async def endless(request: Request) -> Response:
        async def body() -> Any:
            while not await request.is_disconnected():
                sent["bytes"] += 65536
                yield b"x" * 65536

        return StreamingResponse(body(), media_type="text/plain")

    memory = start_memory(spawn, tmp_path, app_id="team-a.kb")
    with running_app(Starlette(routes=[Route("/endless", endless)])) as url:
        defs = materialize_builtin(
            name="handbook", type_name="knowledge", config={"urls": [f"{url}/endless", page]}
        )
        conn = create_connector(defs)
        conn._env = {"AGENTIC_MEMORY_URL": memory.base_url, "RUNTIME_TOKEN": memory.token}

        async def go() -> dict[str, Any]:
            try:
                return await conn.execute("knowledge.search", {"query": "office", "top_k": 10}, env={})
            finally:
                await conn.aclose()

        found = asyncio.run(go())
    assert {r["source"] for r in found["results"]} == {page}
    assert sent["bytes"] > MAX_URL_BYTES  # it was read up to the bound, then let go


def test_an_unreachable_memory_server_is_a_connection_error(tmp_path: Path, page: str) -> None:
    defs = materialize_builtin(name="kb", type_name="knowledge", config={})
    conn = create_connector(defs)
    conn._env = {"AGENTIC_MEMORY_URL": "http://127.0.0.1:9", "RUNTIME_TOKEN": "t-0123456789abcdef"}

    async def go() -> None:
        try:
            with pytest.raises(BuiltinToolError) as caught:
                await conn.execute("knowledge.search", {"query": "x"}, env={})
            assert (
                caught.value.category == "connection" and "t-0123456789abcdef" not in caught.value.explanation
            )
        finally:
            await conn.aclose()

    asyncio.run(go())


def test_a_model_answers_from_the_knowledge_base_through_the_oe(
    tmp_path: Path, spawn: Callable[..., Process], page: str
) -> None:
    (tmp_path / "memory-pod").mkdir()
    memory = start_memory(spawn, tmp_path / "memory-pod", app_id=AGENT.replace("/", "."), token=RUNTIME_TOKEN)
    mount = knowledge_dir(tmp_path)

    def bundle(directory: Path, _: str) -> Path:
        defs = materialize_builtin(
            name="handbook", type_name="knowledge", config={"paths": [str(mount)], "urls": [page]}
        )
        return write_bundle(build_bundle([], [defs]), directory)

    tenant = Tenant(
        entrypoint="orders_agent.agent:app",
        pythonpath=EXAMPLE,
        bundle=bundle,
        tool_env={"AGENTIC_MEMORY_URL": memory.base_url},
    )
    with running_llm_peer(api_key=LLM_KEY) as llm_peer:
        platform = Platform(
            tmp=tmp_path,
            spawn=spawn,
            llm_base_url=llm_peer.base_url,
            provider_url="http://127.0.0.1:9",
            tenant=tenant,
        ).start()
        llm_peer.push(
            Turn.calls(
                ("knowledge__search", {"query": "how quickly must a page be acknowledged", "top_k": 2})
            ),
            Turn.answer("Within fifteen minutes."),
        )
        execution_id = platform.invoke({"text": "How quickly must on-call acknowledge a page?"})
        view = platform.wait(execution_id, "completed", "failed", timeout=90)
        assert view["status"] == "completed", view
        assert view["result"] == {"answer": "Within fifteen minutes."}
        offered = sorted(t["function"]["name"] for t in llm_peer.requests[0].body["tools"])
        assert offered == ["knowledge__get", "knowledge__search"]
        last = llm_peer.requests[-1].body["messages"]
        answer = json.loads(next(m["content"] for m in last if m["role"] == "tool"))
        assert answer["results"][0]["source"] == "file:knowledge/runbook.md"
        assert "fifteen minutes" in answer["results"][0]["text"]
        audit = platform.audit(execution_id)
        assert "knowledge.search" in {r.get("tool") for r in audit if r.get("kind") == "tool"}
        assert RUNTIME_TOKEN not in platform.outputs() + json.dumps(audit) + json.dumps(view)


@pytest.mark.parametrize(
    "chunk_id",
    [
        "../../memory/semantic/records/diary?namespace=notes&user_id=victim",
        "k-0000000000000000-000000000000-0/../../../memory/semantic/records/diary",
        "k-0000000000000000-000000000000-0?x=1",
    ],
)
def test_a_model_cannot_steer_knowledge_get_to_another_route(
    tmp_path: Path, spawn: Callable[..., Process], page: str, chunk_id: str
) -> None:
    """Attacker: the model names a chunk id that would turn the Tool Pod's call into a read of a user's
    memory (this Memory server has no OE key, so its memory routes take the scope from the query)."""
    memory = start_memory(spawn, tmp_path, app_id="team-a.kb")
    with memory.client() as http:
        wrote = http.post(
            "/memory/semantic/records",
            json={
                "namespace": "notes",
                "user_id": "victim",
                "id": "diary",
                "content": "victim-diary-Canary-51",
            },
        )
        assert wrote.status_code == 201
    defs = materialize_builtin(name="kb", type_name="knowledge", config={})
    conn = create_connector(defs)
    conn._env = {"AGENTIC_MEMORY_URL": memory.base_url, "RUNTIME_TOKEN": memory.token}

    async def go() -> None:
        try:
            with pytest.raises((BuiltinToolError, ValueError)) as refused:
                await conn.execute("knowledge.get", {"id": chunk_id}, env={})
            assert "victim-diary-Canary-51" not in str(refused.value)
            assert type(refused.value).__name__ in (
                "BuiltinToolError",
                "ToolArgumentError",
            )  # refused, not read
        finally:
            await conn.aclose()

    asyncio.run(go())
    # The client refuses it too, should a caller skip the tool's schema.
    from agent_runtime.memory.knowledge_client import KnowledgeClient, KnowledgeRequestError

    async def direct() -> None:
        client = KnowledgeClient(memory.base_url, token=memory.token)
        try:
            with pytest.raises(KnowledgeRequestError) as refused:
                await client.get(chunk_id)
            assert refused.value.status == 400 and "victim-diary" not in str(refused.value)
        finally:
            await client.aclose()

    asyncio.run(direct())
