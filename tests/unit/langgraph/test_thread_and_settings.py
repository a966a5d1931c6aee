"""Thread ids (LG-05), scoped reads (LG-06), fail closed (CP-04, LG-07), checkpoint settings (CP-02/03)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from agent_runtime.langgraph import (
    App,
    CheckpointConfigError,
    CheckpointScopeError,
    PlatformCheckpointer,
    ThreadIdError,
    checkpoint_settings,
    mongo_db_name,
    session_messages,
)
from agent_runtime.sdk import RequestContext


def _ctx(**fields: Any) -> RequestContext:
    return RequestContext(
        **{"execution_id": "ex-1", "session_id": "sess", "workspace_id": "ns.agent", **fields}
    )


def test_the_default_thread_id_is_session_and_workspace() -> None:
    app = App(env={"APP_ID": "ns.agent"})
    assert app.thread_id(_ctx()) == "sess:ns.agent"
    assert app.thread_id(_ctx(resume=True)) == "sess:ns.agent"
    # No session: the execution is its own thread, so its resume finds it.
    assert app.thread_id(_ctx(session_id=None)) == "ex-1:ns.agent"
    # Without APP_ID (local runs, tests) an empty scope is legitimate: "sess:", never the raw "sess".
    assert App(env={}).thread_id(_ctx(workspace_id="")) == "sess:"


def test_a_custom_resolver_is_used_verbatim_for_new_and_resumed_runs() -> None:
    app = App(env={"APP_ID": "ns.agent"})
    calls: list[RequestContext] = []

    @app.resolve_thread_id
    def by_user(ctx: RequestContext) -> str:
        calls.append(ctx)
        return f"{ctx.session_id}__{ctx.user_id}"

    assert app.thread_id(_ctx(user_id="u1")) == "sess__u1"
    assert app.thread_id(_ctx(user_id="u1", resume=True)) == "sess__u1"
    assert len(calls) == 2

    @app.resolve_thread_id
    def broken(ctx: RequestContext) -> Any:
        return None

    with pytest.raises(ThreadIdError, match="broken returned NoneType"):
        app.thread_id(_ctx())


def test_a_managed_runtime_without_app_id_fails_closed() -> None:
    env = {"REQUIRE_PROJECT_SCOPED_DB": "true", "CHECKPOINT_STORE": "memory"}
    app = App(env=env)
    with pytest.raises(CheckpointScopeError, match="APP_ID is not"):
        app.thread_id(_ctx())
    app.resolve_thread_id(lambda ctx: "custom")
    with pytest.raises(CheckpointScopeError):
        app.thread_id(_ctx())
    saver = app.checkpointer()
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}

    async def every_call_raises() -> None:
        with pytest.raises(CheckpointScopeError):
            await saver.aput(config, empty_checkpoint(), {}, {})
        with pytest.raises(CheckpointScopeError):
            await saver.aput_writes(
                {"configurable": {**config["configurable"], "checkpoint_id": "x"}}, [], "t"
            )
        with pytest.raises(CheckpointScopeError):
            await saver.aget_tuple(config)
        with pytest.raises(CheckpointScopeError):
            [item async for item in saver.alist(config)]

    asyncio.run(every_call_raises())
    inner = saver._backend
    assert isinstance(inner, InMemorySaver) and not inner.storage  # nothing was written


def test_another_workspace_than_app_id_never_becomes_a_thread_id() -> None:
    with pytest.raises(CheckpointScopeError, match="names workspace"):
        App(env={"APP_ID": "ns.agent"}).thread_id(_ctx(workspace_id="ns.other"))


def test_history_reads_only_the_workspace_scoped_key() -> None:
    saver = PlatformCheckpointer.wrapping(InMemorySaver())

    async def scenario() -> None:
        for thread, text in (("sess", "legacy, unscoped"), ("sess:ws1", "scoped"), ("sess:", "local")):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"messages": [HumanMessage(text, id="h"), AIMessage("ok", id="a")]}
            checkpoint["channel_versions"] = {"messages": 1}
            config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            await saver.aput(config, checkpoint, {"source": "input", "step": 0}, {"messages": 1})
        scoped = await session_messages(saver, "sess", workspace_id="ws1")
        assert [m["content"] for m in scoped] == ["scoped", "ok"]
        assert await session_messages(saver, "sess", workspace_id="ws2") == []
        local = await session_messages(saver, "sess", workspace_id="")
        assert [m["content"] for m in local] == ["local", "ok"]

    asyncio.run(scenario())


def test_checkpoint_settings_name_the_variable_to_fix() -> None:
    assert checkpoint_settings({}).store == "sqlite"
    assert checkpoint_settings({"CHECKPOINT_STORE": "memory"}).store == "memory"
    mongo = checkpoint_settings({"MONGODB_URI": "mongodb://u:secret-pw@127.0.0.1:1/", "APP_ID": "team-a.bot"})
    assert (mongo.store, mongo.db_name) == ("mongodb", "mdb_store_team_a")
    assert "secret-pw" not in repr(mongo)
    assert mongo_db_name({"CHECKPOINT_DB_NAME": "shared_cp", "APP_ID": "team-a.bot"}) == "shared_cp"
    assert mongo_db_name({"MDB_AGENTIC_STORE_DB": "base", "APP_ID": "my-ns.x"}) == "base_my_ns"
    with pytest.raises(CheckpointConfigError, match="MONGODB_URI"):
        checkpoint_settings({"CHECKPOINT_STORE": "mongodb"})
    with pytest.raises(CheckpointConfigError, match="CHECKPOINT_STORE='redis'"):
        checkpoint_settings({"CHECKPOINT_STORE": "redis"})
    with pytest.raises(CheckpointConfigError, match="CHECKPOINT_DB_NAME"):
        mongo_db_name({"MDB_AGENTIC_STORE_DB": "b" * 60, "APP_ID": "team-a.x"})
    with pytest.raises(CheckpointConfigError, match="character MongoDB refuses"):
        mongo_db_name({"CHECKPOINT_DB_NAME": "a.b"})
    with pytest.raises(CheckpointConfigError, match="mongodb://") as caught:
        checkpoint_settings({"MONGODB_URI": "postgres://u:pw-123@h/"})
    assert "pw-123" not in str(caught.value)
