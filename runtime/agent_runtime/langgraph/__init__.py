"""Agent Engine's LangGraph SDK (the `langgraph` extra): LangGraph agents governed by the platform.

`App` (entrypoint building the compiled graph, `checkpointer()`, `resolve_thread_id()`, `llm()`, `tool()`,
`langchain_tools()`, `suspend()`), the governed chat model and tools, the platform checkpointer and the
LangChain <-> platform message translation. See docs/langgraph.md.
"""

from agent_runtime.langgraph.agent import CheckpointMissingError, LangGraphAgent, UngovernedInterruptError
from agent_runtime.langgraph.checkpointer import (
    CheckpointConfigError,
    CheckpointScopeError,
    CheckpointSettings,
    checkpoint_settings,
    mongo_db_name,
)
from agent_runtime.langgraph.durable_tools import GovernedTool
from agent_runtime.langgraph.interrupt_rejection import InterruptRejected
from agent_runtime.langgraph.llm_adapter import LangChainModelAdapter
from agent_runtime.langgraph.messages import from_platform, to_platform
from agent_runtime.langgraph.platform_checkpointer import PlatformCheckpointer
from agent_runtime.langgraph.query import session_messages
from agent_runtime.langgraph.runtime import App
from agent_runtime.langgraph.secure_llm import GovernedChatModel
from agent_runtime.langgraph.thread_id import ThreadIdError, default_thread_id, scoped_thread_id

__all__ = [
    "App",
    "CheckpointConfigError",
    "CheckpointMissingError",
    "CheckpointScopeError",
    "CheckpointSettings",
    "GovernedChatModel",
    "GovernedTool",
    "InterruptRejected",
    "LangChainModelAdapter",
    "LangGraphAgent",
    "PlatformCheckpointer",
    "ThreadIdError",
    "UngovernedInterruptError",
    "checkpoint_settings",
    "default_thread_id",
    "from_platform",
    "mongo_db_name",
    "scoped_thread_id",
    "session_messages",
    "to_platform",
]
