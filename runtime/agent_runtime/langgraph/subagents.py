"""Which agent of a multi-agent graph makes a call (LG-15): LangChain's `lc_agent_name`.

`create_agent(name=...)` (and so each deepagents subagent) binds its name into the run config's metadata
as `lc_agent_name`; LangGraph merges it into every nested call's config, the innermost agent winning. The
governed model, tools and file system read it when they start a call, so the OE's audit, execution log
and events say which subagent asks.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from langgraph.config import get_config

from agent_runtime.sdk.context import calling_agent_scope

AGENT_NAME_KEY = "lc_agent_name"


def lc_agent_name() -> str | None:
    """The name of the agent running this code, or None outside a named agent."""
    try:
        config = get_config()
    except RuntimeError:
        return None
    name = (config.get("metadata") or {}).get(AGENT_NAME_KEY)
    return name if isinstance(name, str) and name else None


def calling_agent() -> AbstractContextManager[None]:
    """A scope in which the calls started carry the running agent's name to the OE."""
    return calling_agent_scope(lc_agent_name())
