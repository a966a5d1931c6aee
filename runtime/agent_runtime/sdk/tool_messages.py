"""Which exceptions a tool body raises to talk to the model (`ToolError`, LangChain's `ToolException`).

Hiding exception text is the default: a message may quote a provider's body or a credential. A tool that
means its message for the model says so by raising `ToolError("...")` (or LangChain's `ToolException`,
which LangChain tools raise for the same purpose); that text, with known secret values removed, is the
call's error explanation under the category `tool_message`.
"""

from __future__ import annotations

import sys

from agent_runtime.sdk.errors import ToolError

TOOL_MESSAGE = "tool_message"
MAX_TOOL_MESSAGE_CHARS = 2000


def _is_langchain_tool_exception(exc: BaseException) -> bool:
    # Imported only when LangChain is already loaded: the base SDK does not depend on it.
    tools = sys.modules.get("langchain_core.tools")
    tool_exception = getattr(tools, "ToolException", None) if tools is not None else None
    return isinstance(tool_exception, type) and isinstance(exc, tool_exception)


def tool_message(exc: BaseException) -> str | None:
    """The text `exc` carries for the model, or None for an exception whose text stays hidden."""
    if isinstance(exc, ToolError):
        text = exc.message
    elif _is_langchain_tool_exception(exc):
        text = str(exc)
    else:
        return None
    return text[:MAX_TOOL_MESSAGE_CHARS]
