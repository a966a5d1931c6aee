"""Agent SDK: `App` (`@app.tool`, `@app.entrypoint`, `app.llm`, `app.call_tool`, `app.suspend`), the
request context, a tool call's `idempotency_key()`, the errors an intercepted call raises, and the
framework-less tool loop."""

from agent_runtime.sdk.app import DEFAULT_TOOL_TIMEOUT_S, App, ToolSpec
from agent_runtime.sdk.calls import idempotency_key
from agent_runtime.sdk.context import RequestContext, current_context
from agent_runtime.sdk.entrypoint import EntrypointError, load_app, parse_entrypoint
from agent_runtime.sdk.errors import PlatformFailure, PolicyDeniedException, ToolError, ToolExecutionError
from agent_runtime.sdk.input_schema import ToolDefinitionError
from agent_runtime.sdk.loop import ToolLoopExhaustedError, tool_loop
from agent_runtime.sdk.memory import (
    MemoryClient,
    MemoryConfigError,
    MemoryRequestError,
    MemoryUnavailable,
    shared_memory_client,
)
from agent_runtime.sdk.oe_client import OEApi, OEClient, OEConfigError, oe_url_from_env
from agent_runtime.sdk.runnable import Runnable
from agent_runtime.sdk.secure import SecureToolWrapper, SecureWrappedLLM, call_tool

__all__ = [
    "DEFAULT_TOOL_TIMEOUT_S",
    "App",
    "EntrypointError",
    "MemoryClient",
    "MemoryConfigError",
    "MemoryRequestError",
    "MemoryUnavailable",
    "OEApi",
    "OEClient",
    "OEConfigError",
    "PlatformFailure",
    "PolicyDeniedException",
    "RequestContext",
    "Runnable",
    "SecureToolWrapper",
    "SecureWrappedLLM",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolLoopExhaustedError",
    "ToolSpec",
    "call_tool",
    "current_context",
    "idempotency_key",
    "load_app",
    "oe_url_from_env",
    "parse_entrypoint",
    "shared_memory_client",
    "tool_loop",
]
