"""Tool calls a turn asked for but never answered, made whole before the next model call.

A platform failure ends a turn in the middle of its tools step, and the platform checkpointer keeps
nothing of that step (LG-08), so the thread's last AI message can hold tool calls without their tool
messages. Providers refuse such a conversation. Before a governed model call, each unanswered call gets a
fixed tool message saying it was stopped: no failure text (it never reaches the model), and the same
every time, so the call's fingerprint does not change on replay.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

STOPPED_TEXT = "this tool call was stopped before it finished; its outcome is unknown"


def stopped_answers(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """A stopped-call tool message for each tool call in `messages` that no tool message answers."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [
        ToolMessage(content=STOPPED_TEXT, tool_call_id=call["id"], name=call["name"], status="error")
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call.get("id") and call["id"] not in answered
    ]


def complete_stopped_tool_calls(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`messages` with a stopped-call tool message after each AI message's unanswered tool calls."""
    out: list[BaseMessage] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        out.append(message)
        index += 1
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        answered: set[str] = set()
        while index < len(messages) and isinstance(messages[index], ToolMessage):
            answered.add(messages[index].tool_call_id)  # type: ignore[attr-defined]
            out.append(messages[index])
            index += 1
        for call in message.tool_calls:
            if call.get("id") and call["id"] not in answered:
                out.append(
                    ToolMessage(
                        content=STOPPED_TEXT, tool_call_id=call["id"], name=call["name"], status="error"
                    )
                )
    return out
