"""Agent SDK: `App`, `@app.tool`, `@app.entrypoint`."""

from agent_runtime.sdk.app import DEFAULT_TOOL_TIMEOUT_S, App, ToolSpec
from agent_runtime.sdk.entrypoint import EntrypointError, load_app, parse_entrypoint
from agent_runtime.sdk.input_schema import ToolDefinitionError

__all__ = [
    "DEFAULT_TOOL_TIMEOUT_S",
    "App",
    "EntrypointError",
    "ToolDefinitionError",
    "ToolSpec",
    "load_app",
    "parse_entrypoint",
]
