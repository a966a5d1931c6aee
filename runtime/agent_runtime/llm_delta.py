"""A model's stream as `LLMDelta`s: built from the client's chunk events, redacted on a window, joined.

One `DeltaStream` per streamed call. The Tool Pod feeds it the chat-completions client's `llm_chunk`
events (`chunk`) and the final AI message (`end`); the OE feeds it the Tool Pod's deltas again
(`relay`), with the OE's own secrets. Either way every text field goes through a `DeltaRedactor`, so a
secret split across chunks never leaves in any delta, and the last delta carries what the windows held
back, the finish reason and the usage. `whole` is a replayed step's cached message as one delta.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agent_runtime.protocol import LLMDelta, ToolCallDelta
from agent_runtime.redaction import Redactor
from agent_runtime.stream_redaction import DeltaRedactor

_CONTENT = "content"


class DeltaStream:
    """The deltas of one streamed model call, numbered from 0, every text field window-redacted."""

    def __init__(self, redactor: Redactor, *, step: int | None = None) -> None:
        self._windows = DeltaRedactor(redactor)
        self._step = step
        self._index = 0
        self._id: str | None = None
        self.text_parts: list[str] = []  # what went out of `content`: the partial text if the call stops

    @property
    def count(self) -> int:
        return self._index

    def chunk(self, event: Mapping[str, Any]) -> LLMDelta | None:
        """A client's `llm_chunk` event as a delta; None when nothing of it may go out yet (or had none)."""
        content = event.get("content")
        extra = event.get("additional_kwargs") or {}
        calls = [
            ToolCallDelta(
                index=int(piece.get("index") or 0),
                id=piece.get("id"),
                name=piece.get("name"),
                arguments=piece.get("args") or "",
            )
            for piece in event.get("tool_call_chunks") or ()
        ]
        return self._next(
            id=event.get("id"),
            text=content if isinstance(content, str) else "",
            extra={k: v for k, v in extra.items() if isinstance(v, str)},
            tool_calls=calls,
        )

    def relay(self, delta: LLMDelta) -> LLMDelta | None:
        """Another hop's delta, redacted again here; the last one keeps its finish reason and usage."""
        if delta.last:
            return self.end(finish_reason=delta.finish_reason, usage=delta.usage, id=delta.id, more=delta)
        return self._next(id=delta.id, text=delta.text, extra=delta.extra, tool_calls=delta.tool_calls)

    def end(
        self,
        *,
        finish_reason: str | None,
        usage: Mapping[str, Any] | None,
        id: str | None = None,
        more: LLMDelta | None = None,
    ) -> LLMDelta:
        """The last delta: whatever the windows held back (plus `more`), the finish reason, the usage."""
        pending = self._pieces(
            text=more.text if more else "",
            extra=more.extra if more else {},
            tool_calls=more.tool_calls if more else [],
        )
        held = self._windows.flush()
        text = pending["text"] + held.pop(_CONTENT, "")
        extra = dict(pending["extra"])
        calls = {call.index: call for call in pending["tool_calls"]}
        for field, piece in held.items():
            if field.startswith("tool:"):
                index = int(field.removeprefix("tool:"))
                call = calls.get(index) or ToolCallDelta(index=index)
                calls[index] = call.model_copy(update={"arguments": call.arguments + piece})
            else:
                extra[field] = extra.get(field, "") + piece
        self.text_parts.append(text)
        return self._emit(
            id=id,
            text=text,
            extra=extra,
            tool_calls=[calls[i] for i in sorted(calls)],
            finish_reason=finish_reason,
            usage=self._windows.value(dict(usage)) if usage is not None else None,
            last=True,
        )

    def end_of(self, message: Mapping[str, Any]) -> LLMDelta:
        """The last delta of a stream whose final AI message is `message`."""
        metadata = message.get("response_metadata") or {}
        return self.end(
            finish_reason=metadata.get("finish_reason"),
            usage=message.get("usage_metadata"),
            id=message.get("id"),
        )

    def whole(self, message: Mapping[str, Any], *, from_cache: bool) -> LLMDelta:
        """`message` (already redacted: a cached outcome) as the one and last delta of its step."""
        metadata = message.get("response_metadata") or {}
        extra = {
            k: v for k, v in (message.get("additional_kwargs") or {}).items() if isinstance(v, str) and v
        }
        calls = [
            ToolCallDelta(
                index=index,
                id=call.get("id"),
                name=call.get("name"),
                arguments=json.dumps(call.get("args"), separators=(",", ":")),
            )
            for index, call in enumerate(message.get("tool_calls") or ())
        ]
        content = message.get("content")
        delta = LLMDelta(
            step=self._step,
            index=self._index,
            id=message.get("id"),
            text=content if isinstance(content, str) else "",
            extra=extra,
            tool_calls=calls,
            finish_reason=metadata.get("finish_reason"),
            usage=message.get("usage_metadata"),
            last=True,
            from_cache=from_cache,
        )
        self._index += 1
        return delta

    @property
    def partial_text(self) -> str:
        return "".join(self.text_parts)

    # internals ------------------------------------------------------------------------------------------

    def _pieces(
        self, *, text: str, extra: Mapping[str, str], tool_calls: Iterable[ToolCallDelta]
    ) -> dict[str, Any]:
        out_calls = []
        for call in tool_calls:
            arguments = self._windows.push(f"tool:{call.index}", call.arguments) if call.arguments else ""
            out_calls.append(
                ToolCallDelta(
                    index=call.index,
                    id=self._windows.text(call.id) if call.id else call.id,
                    name=self._windows.text(call.name) if call.name else call.name,
                    arguments=arguments,
                )
            )
        return {
            "text": self._windows.push(_CONTENT, text) if text else "",
            "extra": {k: out for k, v in extra.items() if (out := self._windows.push(k, v))},
            "tool_calls": [c for c in out_calls if c.id or c.name or c.arguments],
        }

    def _next(
        self, *, id: str | None, text: str, extra: Mapping[str, str], tool_calls: Iterable[ToolCallDelta]
    ) -> LLMDelta | None:
        pieces = self._pieces(text=text, extra=extra, tool_calls=tool_calls)
        if not (pieces["text"] or pieces["extra"] or pieces["tool_calls"]):
            if id and self._id is None:
                self._id = self._windows.text(id)
            return None
        self.text_parts.append(pieces["text"])
        return self._emit(id=id, **pieces)

    def _emit(self, *, id: str | None, **fields: Any) -> LLMDelta:
        if id:
            self._id = self._id or self._windows.text(id)
        delta = LLMDelta(step=self._step, index=self._index, id=self._id, **fields)
        self._index += 1
        return delta


def merged(deltas: Iterable[LLMDelta], *, index: int) -> LLMDelta:
    """Consecutive deltas of one step as one (numbered `index`): texts and argument pieces concatenated in
    order, the last one's finish reason and usage. What arrived together goes out together: under load a
    publisher sends fewer, larger deltas instead of falling behind, and the joined message is the same."""
    items = list(deltas)
    text: list[str] = []
    extra: dict[str, list[str]] = {}
    calls: dict[int, ToolCallDelta] = {}
    for delta in items:
        text.append(delta.text)
        for key, piece in delta.extra.items():
            extra.setdefault(key, []).append(piece)
        for call in delta.tool_calls:
            known = calls.get(call.index)
            calls[call.index] = (
                call
                if known is None
                else known.model_copy(
                    update={
                        "id": known.id or call.id,
                        "name": known.name or call.name,
                        "arguments": known.arguments + call.arguments,
                    }
                )
            )
    last = next((delta for delta in reversed(items) if delta.last), None)
    return LLMDelta(
        step=items[0].step,
        index=index,
        id=next((delta.id for delta in items if delta.id), None),
        text="".join(text),
        extra={key: "".join(parts) for key, parts in extra.items()},
        tool_calls=list(calls.values()),
        finish_reason=last.finish_reason if last else None,
        usage=last.usage if last else None,
        last=last is not None,
        from_cache=items[0].from_cache,
    )


def joined(deltas: Iterable[LLMDelta]) -> dict[str, Any]:
    """What a client makes of a step's deltas: the message's id, text, extra fields, tool calls (with
    their arguments parsed), finish reason and usage. Tests compare it with the cached final message."""
    text: list[str] = []
    extra: dict[str, list[str]] = {}
    calls: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {"id": None, "finish_reason": None, "usage": None}
    for delta in sorted(deltas, key=lambda d: d.index):
        out["id"] = out["id"] or delta.id
        text.append(delta.text)
        for key, piece in delta.extra.items():
            extra.setdefault(key, []).append(piece)
        for call in delta.tool_calls:
            slot = calls.setdefault(call.index, {"id": None, "name": None, "arguments": []})
            slot["id"] = slot["id"] or call.id
            slot["name"] = slot["name"] or call.name
            slot["arguments"].append(call.arguments)
        if delta.last:
            out["finish_reason"] = delta.finish_reason
            out["usage"] = delta.usage
    out["text"] = "".join(text)
    out["extra"] = {key: "".join(parts) for key, parts in extra.items()}
    out["tool_calls"] = [
        {"id": slot["id"], "name": slot["name"], "args": _parsed("".join(slot["arguments"]))}
        for _, slot in sorted(calls.items())
    ]
    return out


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments else {}
    except ValueError:
        return arguments
