"""LG-16: LangGraph's callbacks -> the durable execution log (B-17): each node's start and end, in order.

The AER runs the graph with `node_log_config(execution_id)` merged into its config; the handler keeps only
the node runs themselves (the runnable LangGraph names after its node), not the model and tool runs inside
them, and writes names, the LangGraph step and the outcome, never the state.
"""

from __future__ import annotations

import functools
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler

from agent_runtime.execution_log import ExecutionLog


@functools.cache
def _process_log() -> ExecutionLog:
    return ExecutionLog.from_env(component="aer")


class NodeExecutionLogger(AsyncCallbackHandler):
    """Writes `node_start` / `node_end` records of one execution's graph run."""

    def __init__(self, log: ExecutionLog, *, execution_id: str) -> None:
        self.log = log
        self.execution_id = execution_id
        self._nodes: dict[UUID, str] = {}

    async def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        node = (metadata or {}).get("langgraph_node")
        if not isinstance(node, str) or kwargs.get("name") != node:
            return
        self._nodes[run_id] = node
        step = (metadata or {}).get("langgraph_step")
        detail = {"langgraph_step": step} if isinstance(step, int) else {}
        self.log.write(self.execution_id, kind="node", event="node_start", node=node, detail=detail)

    async def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        node = self._nodes.pop(run_id, None)
        if node is not None:
            self.log.write(self.execution_id, kind="node", event="node_end", node=node, status="ok")

    async def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        node = self._nodes.pop(run_id, None)
        if node is None:
            return
        # LangGraph ends a node that paused (interrupt, a platform suspension) with an exception too.
        paused = type(error).__name__ in ("GraphInterrupt", "NodeInterrupt", "SuspendRequested")
        self.log.write(
            self.execution_id,
            kind="node",
            event="node_end",
            node=node,
            status="interrupted" if paused else "error",
            detail={"error_type": type(error).__name__},
        )


def node_log_config(execution_id: str, log: ExecutionLog | None = None) -> dict[str, Any]:
    """`{"callbacks": [NodeExecutionLogger]}` to merge into a graph run's config; `{}` with the log off."""
    log = log or _process_log()
    if not log.enabled:
        return {}
    return {"callbacks": [NodeExecutionLogger(log, execution_id=execution_id)]}
