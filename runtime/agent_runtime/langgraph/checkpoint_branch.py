"""Branching a thread from one of its checkpoints (issue 39): the replay of a turn an AER crash cut short.

Each checkpoint a run writes carries its execution id in the checkpoint metadata (`EXECUTION_KEY`, from
the run config's `metadata`, which LangGraph copies there). A run the OE starts again after its AER was
lost arrives as a resume, but its thread's latest checkpoint holds no step ledger (none was saved: the
run did not suspend). When that checkpoint is this execution's own, the turn is replayed from its start:
LangGraph continues from the execution's first checkpoint (its input already applied) with no input, a
new branch of the thread, and the calls get the numbers they had, 1, 2, 3..., so the OE answers each
from its replay cache and nothing that already ran runs again (a subagent's included: its subgraph's
checkpoints are keyed by the parent's task, which is new on the branch, so it starts over and replays).

A run cut short after a graph-native hold was resumed continues from that hold's checkpoint instead
(`execution_checkpoints` finds it; the AER resumes it with the hold's recorded reply), so the node that
called `interrupt()` gets the reviewer's answer again rather than asking anew.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

EXECUTION_KEY = "agent_engine_execution_id"
_INPUT = "input"


def execution_metadata(execution_id: str) -> dict[str, Any]:
    """The run config's `metadata`: every checkpoint of the run names its execution."""
    return {EXECUTION_KEY: execution_id}


async def turn_start(
    checkpointer: BaseCheckpointSaver, *, thread_id: str, execution_id: str
) -> dict[str, Any] | None:
    """The config of `execution_id`'s first checkpoint on the thread, when the thread's latest checkpoint
    is also that execution's (it was cut short); None otherwise (another turn ran since, or none)."""
    root = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    first: Any = None
    latest_seen = False
    async for found in checkpointer.alist(root):
        if (found.config.get("configurable") or {}).get("checkpoint_ns", ""):
            continue
        owner = (found.metadata or {}).get(EXECUTION_KEY)
        if not latest_seen:
            latest_seen = True
            if owner != execution_id:
                return None
        if owner != execution_id:
            break  # newest first: the execution's checkpoints end here
        if (found.metadata or {}).get("source") == _INPUT:
            first = found
    return None if first is None else dict(first.config)


async def execution_checkpoints(
    checkpointer: BaseCheckpointSaver, *, thread_id: str, execution_id: str
) -> list[CheckpointTuple]:
    """The thread's root checkpoints that `execution_id` wrote since the last one another execution wrote,
    newest first (with their pending writes); empty when the latest is not this execution's."""
    root = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    found: list[CheckpointTuple] = []
    async for item in checkpointer.alist(root):
        if (item.config.get("configurable") or {}).get("checkpoint_ns", ""):
            continue
        if (item.metadata or {}).get(EXECUTION_KEY) != execution_id:
            break
        found.append(item)
    return found


async def copy_turn_start(
    checkpointer: BaseCheckpointSaver,
    *,
    thread_id: str,
    execution_id: str,
    to_thread_id: str,
    to_execution_id: str,
) -> str:
    """Copy the thread's lineage up to `execution_id`'s first checkpoint (its turn start) into
    `to_thread_id`, that last one marked as `to_execution_id`'s: the checkpoint a fork's run replays the
    turn from (session fork, LG-18). Returns its id; the source thread is only read. Raises LookupError
    when the execution wrote no checkpoint on the thread."""
    root = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    lineage = [
        found
        async for found in checkpointer.alist(root)
        if not (found.config.get("configurable") or {}).get("checkpoint_ns", "")
    ]
    lineage.reverse()  # oldest first
    start = next(
        (
            index
            for index, found in enumerate(lineage)
            if (found.metadata or {}).get(EXECUTION_KEY) == execution_id
            and (found.metadata or {}).get("source") == _INPUT
        ),
        None,
    )
    if start is None:
        raise LookupError(f"execution {execution_id!r} wrote no checkpoint on thread {thread_id!r}")
    parent: dict[str, Any] = {"configurable": {"thread_id": to_thread_id, "checkpoint_ns": ""}}
    for index, found in enumerate(lineage[: start + 1]):
        metadata = dict(found.metadata or {})
        if index == start:
            metadata[EXECUTION_KEY] = to_execution_id
        checkpoint = found.checkpoint
        parent = await checkpointer.aput(
            parent,
            checkpoint,
            metadata,
            dict(checkpoint.get("channel_versions") or {}),  # type: ignore[arg-type]
        )
    return str(lineage[start].checkpoint["id"])
