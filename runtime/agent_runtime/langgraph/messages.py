"""LangChain messages <-> the platform's message dicts (LG-14), as pure functions.

The platform dict mirrors LangChain's fields (see `agent_runtime.llm.messages`), so the translation is
lossless for what crosses the OE and its replay cache: `id`, `name`, `additional_kwargs`,
`response_metadata`, `tool_calls`, `invalid_tool_calls` and `usage_metadata` survive a round trip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from pydantic_core import to_jsonable_python

from agent_runtime.llm.messages import Message, MessageError, ai_message, normalize_messages


def to_platform(message: BaseMessage | Mapping[str, Any]) -> Message:
    """One LangChain message (or anything LangChain coerces to one) as a platform dict."""
    if not isinstance(message, BaseMessage):
        (message,) = convert_to_messages([message])  # type: ignore[list-item]
    if isinstance(message, AIMessage):
        return ai_message(
            content=_jsonable(message.content),
            id=message.id,
            name=message.name,
            additional_kwargs=_jsonable(message.additional_kwargs),
            response_metadata=_jsonable(message.response_metadata),
            tool_calls=[
                {"id": call.get("id"), "name": call["name"], "args": _jsonable(call["args"])}
                for call in message.tool_calls
            ],
            invalid_tool_calls=[_jsonable(dict(call)) for call in message.invalid_tool_calls],
            usage_metadata=_jsonable(message.usage_metadata) if message.usage_metadata else None,
        )
    kind = {"human": "human", "system": "system", "tool": "tool"}.get(message.type)
    if kind is None:
        raise MessageError(
            "message.type", f"a {message.type!r} message has no platform form; use human/ai/system/tool"
        )
    out: Message = {"type": kind, "content": _jsonable(message.content)}
    if message.id is not None:
        out["id"] = message.id
    if message.name is not None:
        out["name"] = message.name
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
        out["status"] = message.status
    if message.additional_kwargs:
        out["additional_kwargs"] = _jsonable(message.additional_kwargs)
    if message.response_metadata:
        out["response_metadata"] = _jsonable(message.response_metadata)
    return out


def to_platform_messages(messages: Sequence[BaseMessage | Mapping[str, Any]]) -> list[Message]:
    return [to_platform(message) for message in messages]


def from_platform(message: Mapping[str, Any]) -> BaseMessage:
    """A platform (or OpenAI-style) message dict as the LangChain message it mirrors."""
    (normalized,) = normalize_messages([message])
    kind = normalized["type"]
    common: dict[str, Any] = {"content": normalized["content"]}
    for key in ("id", "name"):
        if normalized.get(key) is not None:
            common[key] = normalized[key]
    for key in ("additional_kwargs", "response_metadata"):
        if normalized.get(key):
            common[key] = dict(normalized[key])
    if kind == "ai":
        return AIMessage(
            **common,
            tool_calls=[
                {"id": call["id"], "name": call["name"], "args": dict(call["args"]), "type": "tool_call"}
                for call in normalized["tool_calls"]
            ],
            invalid_tool_calls=[
                {**call, "type": "invalid_tool_call"} for call in normalized["invalid_tool_calls"]
            ],
            usage_metadata=normalized.get("usage_metadata"),
        )
    if kind == "tool":
        status = normalized.get("status") if normalized.get("status") in ("success", "error") else "success"
        return ToolMessage(**common, tool_call_id=normalized["tool_call_id"], status=status)
    if kind == "system":
        return SystemMessage(**common)
    return HumanMessage(**common)


def from_platform_messages(messages: Sequence[Mapping[str, Any]]) -> list[BaseMessage]:
    return [from_platform(message) for message in messages]


def _jsonable(value: Any) -> Any:
    # What crosses the OE is JSON; anything else a provider put in metadata becomes its JSON form here.
    return to_jsonable_python(value, fallback=repr)
