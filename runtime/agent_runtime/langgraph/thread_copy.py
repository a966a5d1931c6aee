"""`copy_thread` for a backend saver that has none (issue 39): InMemorySaver, AsyncSqliteSaver and
MongoDBSaver leave LangGraph's `acopy_thread` unimplemented, so the platform checkpointer copies through
the saver's own `alist`, `aput` and `aput_writes`.

Every checkpoint of every namespace is copied, oldest first, keeping its id, its metadata, its parent link
and its pending writes: LangGraph asks for the complete parent chain (a DeltaChannel's state is rebuilt
from its ancestors), and the conformance suite checks each of these. The source thread is only read.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple


def _order(found: CheckpointTuple) -> tuple[str, str]:
    configurable = found.config.get("configurable") or {}
    # Checkpoint ids are time-ordered (uuid6), so within a namespace a parent sorts before its children.
    return str(configurable.get("checkpoint_ns", "")), str(configurable.get("checkpoint_id", ""))


def target_config(found: CheckpointTuple, *, target_thread_id: str) -> RunnableConfig:
    """Where `found` goes on the target thread: its namespace, under the same parent id."""
    configurable = found.config.get("configurable") or {}
    parent = (found.parent_config or {}).get("configurable") or {}
    wanted: dict[str, Any] = {
        "thread_id": target_thread_id,
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
    }
    if parent.get("checkpoint_id"):
        wanted["checkpoint_id"] = parent["checkpoint_id"]
    return {"configurable": wanted}


def writes_by_task(found: CheckpointTuple) -> dict[str, list[tuple[str, Any]]]:
    """The pending writes as `aput_writes` takes them: per task, in their order."""
    grouped: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in found.pending_writes or []:
        grouped[task_id].append((channel, value))
    return dict(grouped)


async def copy_thread(saver: BaseCheckpointSaver, source_thread_id: str, target_thread_id: str) -> int:
    """Copy `source_thread_id` into `target_thread_id` with `saver`'s own calls; how many checkpoints."""
    found = [t async for t in saver.alist({"configurable": {"thread_id": source_thread_id}})]
    found.sort(key=_order)
    for item in found:
        stored = await saver.aput(
            target_config(item, target_thread_id=target_thread_id),
            item.checkpoint,
            item.metadata,
            dict(item.checkpoint.get("channel_versions") or {}),
        )
        for task_id, writes in writes_by_task(item).items():
            await saver.aput_writes(stored, writes, task_id)
    return len(found)


def copy_thread_sync(saver: BaseCheckpointSaver, source_thread_id: str, target_thread_id: str) -> int:
    """The same through the sync API (the memory saver, a wrapped sync saver)."""
    found = sorted(saver.list({"configurable": {"thread_id": source_thread_id}}), key=_order)
    for item in found:
        stored = saver.put(
            target_config(item, target_thread_id=target_thread_id),
            item.checkpoint,
            item.metadata,
            dict(item.checkpoint.get("channel_versions") or {}),
        )
        for task_id, writes in writes_by_task(item).items():
            saver.put_writes(stored, writes, task_id)
    return len(found)
