"""LangGraphAgent (LG-12): runs a compiled graph as one execution of the AER.

- New run: `graph.ainvoke(input, {"configurable": {"thread_id": ...}})`, steps numbered 1, 2, 3...
- Suspension: a governed call the OE holds surfaces as `interrupt()`; LangGraph saves the checkpoint with
  the interrupted task pending (CP-06); this agent saves its step ledger with that checkpoint and ends the
  run SUSPENDED.
- Resume: the checkpoint is read back (CP-06), the ledger restored (Decision 4) and the graph continued
  with `ainvoke(None, ...)`: LangGraph re-runs the interrupted task, its calls get their old numbers, and
  the OE answers them from its replay cache or runs the approved one once. No resume value is passed: the
  OE, not LangGraph, holds the reviewer's decision, and a stale value would answer a new interrupt.
- A rejected native `interrupt()` resumes its node, where `interrupt()` raises `InterruptRejected`; a
  node that does not catch it fails the turn, and its pending task is discarded so the next turn runs.
- A run the OE starts again after its AER was lost (a resume whose thread's latest checkpoint is the
  execution's own, with no ledger) replays the turn from its first checkpoint (checkpoint_branch.py).
- No checkpoint on resume (a memory saver in another replica or a restarted process) is an error naming
  the fix (CP-07), never a silent fresh start.
- A graph compiled without a checkpointer cannot resume from one: its suspension ends the run as the base
  SDK's does, and its resume re-runs the turn from the start against the replay cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from pydantic_core import to_jsonable_python

from agent_runtime.langgraph.checkpoint_branch import execution_checkpoints, execution_metadata, turn_start
from agent_runtime.langgraph.checkpointer import CHECKPOINT_SQLITE_PATH_ENV, MONGODB_URI_ENV
from agent_runtime.langgraph.interrupt_rejection import InterruptRejected
from agent_runtime.langgraph.messages import to_platform
from agent_runtime.langgraph.native_holds import (
    INTERRUPT,
    Hold,
    hold_record,
    hold_request,
    pending_hold,
    resume_value,
)
from agent_runtime.langgraph.node_logger import node_log_config
from agent_runtime.langgraph.steps import StepLedger
from agent_runtime.langgraph.stream_modes import INTERRUPT_KEY, streamed_result
from agent_runtime.langgraph.suspend import GraphRun, graph_run_scope
from agent_runtime.langgraph.thread_recovery import discard_pending_tasks, recovered_input
from agent_runtime.protocol import AGENT_SUSPEND, ToolExecuteRequest
from agent_runtime.sdk.calls import resume_state
from agent_runtime.sdk.context import RequestContext, current_run
from agent_runtime.sdk.errors import SuspendRequested
from agent_runtime.sdk.secure import confirm_replies

__all__ = ["INTERRUPT_KEY", "LangGraphAgent"]


class CheckpointMissingError(RuntimeError):
    """A resume found no checkpoint of its own suspension (CP-07); the message names the fix."""


class UngovernedInterruptError(RuntimeError):
    """The graph stopped at an interrupt no OE-governed call asked for."""


def graph_checkpointer(graph: Any) -> BaseCheckpointSaver | None:
    """The saver a compiled graph was given, if any (`checkpointer=True/False/None` are not savers)."""
    saver = getattr(graph, "checkpointer", None)
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def is_compiled_graph(value: Any) -> bool:
    return callable(getattr(value, "ainvoke", None)) and callable(getattr(value, "aget_state", None))


def jsonable_state(value: Any) -> Any:
    """A graph's output as JSON: messages as platform dicts, LangGraph's interrupt marker dropped."""
    if isinstance(value, BaseMessage):
        return to_platform(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable_state(v) for k, v in value.items() if k != INTERRUPT_KEY}
    if isinstance(value, list | tuple):
        return [jsonable_state(item) for item in value]
    return to_jsonable_python(value, fallback=repr)


class LangGraphAgent:
    """One compiled graph of a LangGraph App, run by the AER per execution."""

    def __init__(self, graph: Any, *, thread_id: Callable[[RequestContext], str]) -> None:
        self.graph = graph
        self._thread_id = thread_id

    async def ainvoke(self, value: Any) -> Any:
        run = current_run()
        context = run.context
        thread_id = self._thread_id(context)
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        config.update(node_log_config(context.execution_id))  # LG-16: each node in the execution log
        config["metadata"] = execution_metadata(context.execution_id)
        checkpointer = graph_checkpointer(self.graph)
        ledger = StepLedger(execution_id=context.execution_id)
        graph_input = value
        run_config = config
        if context.resume and checkpointer is not None:
            restarted = await turn_start(checkpointer, thread_id=thread_id, execution_id=context.execution_id)
            if restarted is not None and not await self._has_ledger(checkpointer, config):
                held = await self._resumed_hold(checkpointer, thread_id=thread_id)
                if held is not None:
                    # Cut short after a graph-native hold was resumed: from that hold's checkpoint, with its
                    # recorded reply (below), so interrupt() is answered again, not asked anew.
                    found, ledger = held
                    run_config = {**config, "configurable": dict(found.config["configurable"])}
                else:
                    # Cut short by a lost AER: the turn again from its start, on a branch
                    # (checkpoint_branch.py).
                    run_config = {**config, "configurable": dict(restarted["configurable"])}
            else:
                ledger = await self._restored_ledger(checkpointer, config, thread_id=thread_id)
            graph_input = None
        elif checkpointer is not None:
            # A failed turn may have left tool calls unanswered: say they stopped (thread_recovery.py).
            graph_input = await recovered_input(self.graph, config, value)
        if context.resume and checkpointer is not None and ledger.holding is not None:
            graph_input = await self._past_hold(run_config, ledger)
        run.step_source = ledger.allocate
        scope = GraphRun(
            ledger=ledger, checkpointed=checkpointer is not None, loop=asyncio.get_running_loop()
        )
        with graph_run_scope(scope):
            try:
                result = await self._run(graph_input, run_config)
            except InterruptRejected:
                # Uncaught by the node: the turn fails and its pending task goes, so the next turn runs.
                if checkpointer is not None:
                    await discard_pending_tasks(self.graph, config)
                raise
        if run.suspension is not None and run.platform_failure is None and checkpointer is not None:
            await self._save_ledger(checkpointer, config, ledger=ledger)
            raise run.suspension
        if run.suspension is None and run.platform_failure is None and checkpointer is not None:
            hold = pending_hold(await self.graph.aget_state(config))
            if hold is not None:
                await self._hold(checkpointer, config, ledger=ledger, hold=hold)
        if run.suspension is None and isinstance(result, Mapping) and result.get(INTERRUPT_KEY):
            raise UngovernedInterruptError(
                "the graph stopped at a LangGraph interrupt(), and a graph compiled without a checkpointer "
                "cannot resume from one: compile it with checkpointer=app.checkpointer()"
            )
        return jsonable_state(result)

    async def _run(self, graph_input: Any, config: dict[str, Any]) -> Any:
        """`ainvoke`, or `astream` with each chunk of the client's stream modes sent to the OE (issue 32)."""
        run = current_run()
        asked = run.context.stream_mode
        if not asked or run.oe is None:
            return await self.graph.ainvoke(graph_input, config)
        return await streamed_result(
            self.graph,
            graph_input,
            config,
            execution_id=run.context.execution_id,
            asked=asked,
            send=run.oe.graph_stream,
            jsonable=jsonable_state,
        )

    async def _hold(
        self, checkpointer: BaseCheckpointSaver, config: dict[str, Any], *, ledger: StepLedger, hold: Hold
    ) -> None:
        """Have the OE hold the graph's own pause at a step of its own, then end the run SUSPENDED."""
        run = current_run()
        step = ledger.allocate()
        request = hold_request(hold, execution_id=run.context.execution_id, step=step)
        ledger.holding = hold_record(hold, step=step)
        await self._save_ledger(checkpointer, config, ledger=ledger)
        # The runner sends the pending step to the OE, which holds it, before it reports SUSPENDED.
        raise SuspendRequested(hold.reason, hold.payload, step=step, tool=AGENT_SUSPEND, pending=request)

    async def _past_hold(self, config: dict[str, Any], ledger: StepLedger) -> Any:
        """The input that continues the graph past the hold the OE just had decided."""
        holding = ledger.holding or {}
        ledger.holding = None
        run = current_run()
        step = int(holding["step"])
        state = resume_state()
        reply = state.replies.get(step) if state is not None else None
        if state is None or reply is None:
            raise CheckpointMissingError(
                f"resuming execution {run.context.execution_id!r}: the OE sent no decision for the graph's "
                f"{holding.get('kind')} held at step {step}; start a new execution"
            )
        request = ToolExecuteRequest(
            execution_id=run.context.execution_id, step=step, tool=AGENT_SUSPEND, args=holding["args"]
        )
        # The OE is told this run was given the decision before the run's next call (or its end).
        state.unconfirmed.append((request, reply))
        if reply.decision != "approved" and holding.get("kind") != INTERRUPT:
            await confirm_replies(run)
            await discard_pending_tasks(self.graph, config)
            resume_value(holding, reply)  # raises HoldRejected
        # An interrupt, approved or rejected, resumes its node (a rejection raises InterruptRejected there).
        return resume_value(holding, reply)

    @staticmethod
    async def _resumed_hold(
        checkpointer: BaseCheckpointSaver, *, thread_id: str
    ) -> tuple[CheckpointTuple, StepLedger] | None:
        """This execution's newest checkpoint holding a graph-native hold the OE has a decision for (the
        run resumed it, then was lost), with the ledger saved there; None when the turn held nothing."""
        execution_id = current_run().context.execution_id
        state = resume_state()
        mine = await execution_checkpoints(checkpointer, thread_id=thread_id, execution_id=execution_id)
        for found in mine:
            ledger = StepLedger.from_pending_writes(found.pending_writes, execution_id=execution_id)
            if ledger is None or ledger.holding is None:
                continue
            step = int(ledger.holding["step"])
            if state is not None and state.replies.get(step) is not None:
                return found, ledger
            return None  # held and not decided: not a run the OE restarts
        return None

    @staticmethod
    async def _has_ledger(checkpointer: BaseCheckpointSaver, config: dict[str, Any]) -> bool:
        found = await checkpointer.aget_tuple(config)
        execution_id = current_run().context.execution_id
        writes = found.pending_writes if found is not None else None
        return StepLedger.from_pending_writes(writes, execution_id=execution_id) is not None

    async def _restored_ledger(
        self, checkpointer: BaseCheckpointSaver, config: dict[str, Any], *, thread_id: str
    ) -> StepLedger:
        execution_id = current_run().context.execution_id
        found = await checkpointer.aget_tuple(config)
        if found is None:
            raise CheckpointMissingError(
                f"resuming execution {execution_id!r}: no checkpoint for thread {thread_id!r}. A memory "
                "checkpointer loses them with the process (or lives in another replica); set "
                f"{MONGODB_URI_ENV} for the AER (or {CHECKPOINT_SQLITE_PATH_ENV} on a kept volume)"
            )
        ledger = StepLedger.from_pending_writes(found.pending_writes, execution_id=execution_id)
        if ledger is None:
            raise CheckpointMissingError(
                f"resuming execution {execution_id!r}: the latest checkpoint of thread {thread_id!r} is not "
                "the one its suspension saved (another turn ran on the thread since); start a new execution"
            )
        return ledger

    @staticmethod
    async def _save_ledger(
        checkpointer: BaseCheckpointSaver, config: dict[str, Any], *, ledger: StepLedger
    ) -> None:
        found = await checkpointer.aget_tuple(config)
        if found is None:
            raise CheckpointMissingError("the graph suspended but saved no checkpoint to resume from")
        task_id, writes = ledger.write()
        await checkpointer.aput_writes(found.config, writes, task_id)
