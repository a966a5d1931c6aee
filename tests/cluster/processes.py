"""Child processes that cannot outlive their parent: the product's (agent_runtime.devloop.children)."""

from __future__ import annotations

from agent_runtime.devloop.children import Child, pid_alive, start_child, stop_all, wait_gone

__all__ = ["Child", "pid_alive", "start_child", "stop_all", "wait_gone"]
