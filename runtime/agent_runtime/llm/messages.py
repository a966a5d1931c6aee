"""The platform's message dicts and their OpenAI chat-completions wire form, as pure functions.

A platform message is what crosses the OE and is cached for replay (LangChain-like, B-12, OE-20):

- `{"type": "system" | "human", "content": str | [parts], "name"?: str, "id"?: str}`
- `{"type": "tool", "content": str | [parts], "tool_call_id": str, "name": str | None}`
- `{"type": "ai", "content": str | [parts], "id": str | None, "name": str | None, "additional_kwargs": {},
  "response_metadata": {}, "tool_calls": [{"id", "name", "args": {}}], "invalid_tool_calls": [{"id",
  "name", "args": str, "error"}], "usage_metadata": {"input_tokens", "output_tokens", "total_tokens"} | None}`

OpenAI-style input (`{"role": "system" | "developer" | "user" | "assistant" | "tool", ...}`) is accepted
too and converted. An AI message built from a completion is the same, field for field, whether the
completion arrived whole or as stream chunks, so a streamed call can be replayed from the cache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent_runtime.toolnames import ToolNameError, ToolNameMap, to_model_name

Message = dict[str, Any]

MESSAGE_TYPES = ("system", "human", "ai", "tool")
_ROLE_TO_TYPE = {
    "system": "system",
    "developer": "system",
    "user": "human",
    "assistant": "ai",
    "tool": "tool",
}
_TYPE_TO_ROLE = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
# What the OpenAI API accepts as a function name; dotted platform names (slack.post_message) are mapped to it
# by agent_runtime.toolnames on the way out and back on the way in (Decision 10).
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Body keys the client owns; an option may not replace them.
RESERVED_OPTIONS = frozenset({"model", "messages", "tools", "stream"})
# String fields some OpenAI-compatible servers add to a message or delta; kept, concatenated when streamed.
_EXTRA_TEXT_FIELDS = ("refusal", "reasoning_content")
# Top-level completion fields copied into response_metadata when a server sends them.
_OPTIONAL_METADATA = ("service_tier",)


class MessageError(ValueError):
    """An invalid message, tool schema or option; `where` names it (`messages[2].tool_calls[0].args`)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class ResponseShapeError(ValueError):
    """A completion or chunk that is not what the wire format promises. Names the field, never a value."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


# Platform messages ------------------------------------------------------------------------------------


def normalize_messages(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Validate messages (platform or OpenAI-style) and return them as platform dicts (new objects)."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise MessageError("messages", "must be a list of message objects")
    if not messages:
        raise MessageError("messages", "must hold at least one message")
    # Tool messages in OpenAI form carry no tool name; it is found on the AI message that asked for it.
    names: dict[str, str] = {}
    result = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise MessageError(where, "must be an object")
        if "type" in message:
            normalized = _from_platform(message, where=where, names=names)
        elif "role" in message:
            normalized = _from_openai(message, where=where, names=names)
        else:
            raise MessageError(where, "needs a 'type' (system, human, ai, tool) or an OpenAI 'role'")
        if normalized["type"] == "ai":
            names.update({call["id"]: call["name"] for call in normalized["tool_calls"]})
        result.append(normalized)
    return result


def _from_platform(message: Mapping[str, Any], *, where: str, names: Mapping[str, str]) -> Message:
    kind = message["type"]
    if kind not in MESSAGE_TYPES:
        raise MessageError(f"{where}.type", f"must be one of {', '.join(MESSAGE_TYPES)}")
    out = dict(message)
    out["content"] = _content(message.get("content"), where=f"{where}.content", allow_none=kind == "ai")
    for key in ("id", "name"):
        _optional_str(message.get(key), where=f"{where}.{key}")
    if kind == "tool":
        out["tool_call_id"] = _required_str(message.get("tool_call_id"), where=f"{where}.tool_call_id")
        out["name"] = message.get("name") or names.get(out["tool_call_id"])
    elif kind == "ai":
        out["tool_calls"] = _platform_tool_calls(message.get("tool_calls"), where=f"{where}.tool_calls")
        out["invalid_tool_calls"] = _list(
            message.get("invalid_tool_calls"), where=f"{where}.invalid_tool_calls"
        )
        for key in ("additional_kwargs", "response_metadata"):
            out[key] = dict(_mapping(message.get(key), where=f"{where}.{key}"))
        out["usage_metadata"] = _usage_metadata(
            message.get("usage_metadata"), where=f"{where}.usage_metadata"
        )
        out.setdefault("id", None)
        out.setdefault("name", None)
    return out


def _from_openai(message: Mapping[str, Any], *, where: str, names: Mapping[str, str]) -> Message:
    role = message["role"]
    kind = _ROLE_TO_TYPE.get(role) if isinstance(role, str) else None
    if kind is None:
        raise MessageError(f"{where}.role", f"must be one of {', '.join(_ROLE_TO_TYPE)}")
    content = _content(message.get("content"), where=f"{where}.content", allow_none=kind == "ai")
    name = _optional_str(message.get("name"), where=f"{where}.name")
    if kind == "tool":
        call_id = _required_str(message.get("tool_call_id"), where=f"{where}.tool_call_id")
        return {
            "type": "tool",
            "content": content,
            "tool_call_id": call_id,
            "name": name or names.get(call_id),
        }
    if kind == "ai":
        calls = _list(message.get("tool_calls"), where=f"{where}.tool_calls")
        tool_calls = []
        for index, call in enumerate(calls):
            call_where = f"{where}.tool_calls[{index}]"
            function = _mapping(_item(call, "function", where=call_where), where=f"{call_where}.function")
            raw = function.get("arguments") or "{}"
            args = _parse_arguments(raw) if isinstance(raw, str) else None
            if args is None:
                raise MessageError(f"{call_where}.function.arguments", "must be a JSON object in a string")
            tool_calls.append(
                {
                    "id": _required_str(_item(call, "id", where=call_where), where=f"{call_where}.id"),
                    "name": _required_str(function.get("name"), where=f"{call_where}.function.name"),
                    "args": args,
                }
            )
        extras = {key: message[key] for key in _EXTRA_TEXT_FIELDS if isinstance(message.get(key), str)}
        return ai_message(content=content, name=name, tool_calls=tool_calls, additional_kwargs=extras)
    out: Message = {"type": kind, "content": content}
    if name is not None:
        out["name"] = name
    return out


def ai_message(
    *,
    content: Any = "",
    id: str | None = None,
    name: str | None = None,
    additional_kwargs: Mapping[str, Any] | None = None,
    response_metadata: Mapping[str, Any] | None = None,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    invalid_tool_calls: Sequence[Mapping[str, Any]] = (),
    usage_metadata: Mapping[str, int] | None = None,
) -> Message:
    """An AI message with every field present, in the one order the platform uses."""
    return {
        "type": "ai",
        "content": content,
        "id": id,
        "name": name,
        "additional_kwargs": dict(additional_kwargs or {}),
        "response_metadata": dict(response_metadata or {}),
        "tool_calls": [dict(call) for call in tool_calls],
        "invalid_tool_calls": [dict(call) for call in invalid_tool_calls],
        "usage_metadata": dict(usage_metadata) if usage_metadata is not None else None,
    }


def _content(value: Any, *, where: str, allow_none: bool) -> Any:
    if value is None and allow_none:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        for index, part in enumerate(value):
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise MessageError(f"{where}[{index}]", "a content part must be an object with a 'type'")
        return [dict(part) for part in value]
    raise MessageError(where, "must be a string or a list of content parts")


def _platform_tool_calls(value: Any, *, where: str) -> list[dict[str, Any]]:
    calls = []
    for index, call in enumerate(_list(value, where=where)):
        call_where = f"{where}[{index}]"
        call_id = _required_str(_item(call, "id", where=call_where), where=f"{call_where}.id")
        name = _required_str(call.get("name"), where=f"{call_where}.name")
        args = call.get("args", {})
        if not isinstance(args, Mapping):
            raise MessageError(f"{call_where}.args", "must be an object")
        calls.append({**call, "id": call_id, "name": name, "args": dict(args)})
    return calls


def _usage_metadata(value: Any, *, where: str) -> dict[str, int] | None:
    if value is None:
        return None
    usage = _mapping(value, where=where)
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        if not isinstance(usage.get(key), int) or isinstance(usage.get(key), bool):
            raise MessageError(f"{where}.{key}", "must be an integer")
    return dict(usage)


def _item(value: Any, key: str, *, where: str) -> Any:
    if not isinstance(value, Mapping):
        raise MessageError(where, "must be an object")
    return value.get(key)


def _mapping(value: Any, *, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MessageError(where, "must be an object")
    return value


def _list(value: Any, *, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MessageError(where, "must be a list")
    return list(value)


def _required_str(value: Any, *, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise MessageError(where, "must be a non-empty string")
    return value


def _optional_str(value: Any, *, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise MessageError(where, "must be a string")
    return value


def _parse_arguments(raw: str) -> dict[str, Any] | None:
    """Tool-call arguments as the model wrote them: a JSON object, or None when they are not one."""
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


# The request --------------------------------------------------------------------------------------------


def to_openai_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions `messages` for platform (or OpenAI-style) messages."""
    out = []
    for message in normalize_messages(messages):
        kind = message["type"]
        wire: dict[str, Any] = {"role": _TYPE_TO_ROLE[kind], "content": message["content"]}
        if kind == "tool":
            wire["tool_call_id"] = message["tool_call_id"]
        elif message.get("name"):
            wire["name"] = message["name"]
        if kind == "ai":
            calls = [
                _wire_tool_call(call["id"], _model_name(call["name"]), json.dumps(call["args"]))
                for call in message["tool_calls"]
            ]
            # Invalid calls were still asked for; their tool messages must find them by id.
            calls += [
                _wire_tool_call(call.get("id"), _model_name(call.get("name")), call.get("args") or "")
                for call in message["invalid_tool_calls"]
                if isinstance(call, Mapping) and call.get("id")
            ]
            if calls:
                wire["tool_calls"] = calls
                wire["content"] = message["content"] or None
        out.append(wire)
    return out


def _wire_tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def to_openai_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Chat-completions `tools` for our tool schemas `{name, description, inputSchema}` (or OpenAI's own)."""
    if tools is None:
        return []
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
        raise MessageError("tools", "must be a list of tool schemas")
    out = []
    names: list[str] = []
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, Mapping):
            raise MessageError(where, "must be an object")
        if tool.get("type") == "function" and "function" in tool:
            where, spec = f"{where}.function", _mapping(tool["function"], where=f"{where}.function")
            schema_key = "parameters"
        else:
            spec, schema_key = tool, "inputSchema"
        name = _required_str(spec.get("name"), where=f"{where}.name")
        try:
            name = to_model_name(name)
        except ToolNameError as exc:
            raise MessageError(f"{where}.name", str(exc)) from None
        names.append(spec["name"])
        description = _optional_str(spec.get("description"), where=f"{where}.description") or ""
        parameters = spec.get(schema_key, spec.get("parameters"))
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        function = {
            "name": name,
            "description": description,
            "parameters": dict(_mapping(parameters, where=f"{where}.{schema_key}")),
        }
        out.append({"type": "function", "function": function})
    try:
        ToolNameMap.of(names)  # the collision check: every model name must lead back to one tool
    except ToolNameError as exc:
        raise MessageError("tools", str(exc)) from None
    return out


def offered_tool_names(tools: Sequence[Mapping[str, Any]] | None) -> ToolNameMap:
    """The model names of the tools offered in one call, both ways (checked by `to_openai_tools`)."""
    names = []
    for tool in tools or ():
        spec = tool.get("function") if tool.get("type") == "function" else tool
        if isinstance(spec, Mapping) and isinstance(spec.get("name"), str):
            names.append(spec["name"])
    return ToolNameMap.of(names)


def canonical_tool_names(event: dict[str, Any], names: ToolNameMap) -> dict[str, Any]:
    """An AI message or stream chunk with the model's tool names mapped back to the canonical ones."""
    for key in ("tool_calls", "invalid_tool_calls", "tool_call_chunks"):
        for call in event.get(key) or ():
            if isinstance(call, dict) and isinstance(call.get("name"), str):
                call["name"] = names.canonical(call["name"])
    return event


def _model_name(name: Any) -> Any:
    """A history tool call's name as the model was shown it (unchanged when it cannot be mapped)."""
    try:
        return to_model_name(name) if isinstance(name, str) else name
    except ToolNameError:
        return name


def chat_completion_request(
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    stream: bool = False,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of one `POST /chat/completions`."""
    body: dict[str, Any] = {"model": model, "messages": to_openai_messages(messages)}
    for key, value in (options or {}).items():
        if key in RESERVED_OPTIONS:
            raise MessageError(f"options.{key}", "is set by the client and cannot be an option")
        body[key] = value
    offered = to_openai_tools(tools)
    if offered:  # the API refuses an empty list
        body["tools"] = offered
    if stream:
        body["stream"] = True
        extra = _mapping(body.get("stream_options"), where="options.stream_options")
        body["stream_options"] = {**extra, "include_usage": True}
    else:
        body.pop("stream_options", None)
    try:
        json.dumps(body)
    except (TypeError, ValueError) as exc:
        raise MessageError("options", f"must be JSON values ({type(exc).__name__})") from None
    return body


# The response -------------------------------------------------------------------------------------------


def ai_message_from_completion(body: Any) -> Message:
    """The AI message in a chat-completions response (choice 0)."""
    top = _shape_mapping(body, where="response")
    choice = _first_choice(top.get("choices"), where="response.choices", required=True)
    if choice is None:
        raise ResponseShapeError("response.choices", "has no choice with index 0")
    where = "response.choices[0]"
    message = _shape_mapping(choice.get("message"), where=f"{where}.message")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise ResponseShapeError(f"{where}.message.content", "must be a string or null")
    raw_calls = []
    for index, call in enumerate(_shape_list(message.get("tool_calls"), where=f"{where}.message.tool_calls")):
        call_where = f"{where}.message.tool_calls[{index}]"
        call = _shape_mapping(call, where=call_where)
        function = _shape_mapping(call.get("function"), where=f"{call_where}.function")
        raw_calls.append(
            (
                _shape_str(call.get("id"), where=f"{call_where}.id"),
                _shape_str(function.get("name"), where=f"{call_where}.function.name"),
                _shape_str(function.get("arguments"), where=f"{call_where}.function.arguments"),
            )
        )
    extras = {}
    for key in _EXTRA_TEXT_FIELDS:
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            raise ResponseShapeError(f"{where}.message.{key}", "must be a string or null")
        if value:
            extras[key] = value
    logprobs = choice.get("logprobs")
    if logprobs is not None:
        logprobs = _shape_mapping(logprobs, where=f"{where}.logprobs")
        logprobs = {key: logprobs.get(key) for key in ("content", "refusal")}
    return _assemble(
        top=top,
        content=content if content is not None else "",
        raw_calls=raw_calls,
        extras=extras,
        finish_reason=choice.get("finish_reason"),
        logprobs=logprobs,
        usage=top.get("usage"),
        where="response",
    )


class StreamCollector:
    """Collects chat-completions stream chunks into the same AI message a whole completion gives."""

    def __init__(self) -> None:
        self._top: dict[str, Any] = {}
        self._content: list[str] = []
        self._extras: dict[str, list[str]] = {}
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish_reason: Any = None
        self._logprobs: dict[str, list[Any]] | None = None
        self._usage: Any = None
        self._count = 0

    def add(self, chunk: Any) -> dict[str, Any]:
        """Take one parsed chunk; return its typed stream event (`llm_chunk`, OE-20)."""
        where = f"chunk[{self._count}]"
        self._count += 1
        top = _shape_mapping(chunk, where=where)
        for key in ("id", "model", "system_fingerprint", *_OPTIONAL_METADATA):
            if self._top.get(key) is None and top.get(key) is not None:
                self._top[key] = top[key]
        if top.get("usage") is not None:  # the last one wins: some servers report running totals
            self._usage = _shape_mapping(top["usage"], where=f"{where}.usage")
        event: dict[str, Any] = {
            "type": "llm_chunk",
            "id": top.get("id"),
            "name": None,
            "content": "",
            "additional_kwargs": {},
            "response_metadata": {"model_name": top.get("model")} if top.get("model") else {},
            "tool_call_chunks": [],
        }
        if top.get("usage") is not None:
            event["usage_metadata"] = _usage_from_wire(self._usage, where=f"{where}.usage")
        choice = _first_choice(top.get("choices"), where=f"{where}.choices", required=False)
        if choice is None:
            return event
        delta = _shape_mapping(choice.get("delta") or {}, where=f"{where}.choices[0].delta")
        content = delta.get("content")
        if content is not None:
            event["content"] = _shape_str(content, where=f"{where}.choices[0].delta.content")
            self._content.append(content)
        for key in _EXTRA_TEXT_FIELDS:
            if delta.get(key) is not None:
                piece = _shape_str(delta[key], where=f"{where}.choices[0].delta.{key}")
                self._extras.setdefault(key, []).append(piece)
                event["additional_kwargs"][key] = piece
        calls = _shape_list(delta.get("tool_calls"), where=f"{where}.choices[0].delta.tool_calls")
        for index, call in enumerate(calls):
            event["tool_call_chunks"].append(
                self._add_call(call, where=f"{where}.choices[0].delta.tool_calls[{index}]")
            )
        if choice.get("logprobs") is not None:
            self._add_logprobs(choice["logprobs"], where=f"{where}.choices[0].logprobs")
        if choice.get("finish_reason") is not None:
            self._finish_reason = choice["finish_reason"]
            event["response_metadata"]["finish_reason"] = choice["finish_reason"]
        return event

    def _add_call(self, call: Any, *, where: str) -> dict[str, Any]:
        call = _shape_mapping(call, where=where)
        function = _shape_mapping(call.get("function") or {}, where=f"{where}.function")
        index = call.get("index")
        if index is None:  # some servers omit it: a new id starts a call, otherwise the last one goes on
            known = [i for i, c in self._calls.items() if c["id"] == call.get("id")]
            fresh = call.get("id") is not None and not known
            index = (
                known[0] if known else (len(self._calls) if fresh or not self._calls else max(self._calls))
            )
        if not isinstance(index, int) or isinstance(index, bool):
            raise ResponseShapeError(f"{where}.index", "must be an integer")
        slot = self._calls.setdefault(index, {"id": None, "name": None, "arguments": []})
        # Ids and names come once (some servers repeat them); arguments arrive in pieces.
        for key in ("id", "name"):
            value = call.get("id") if key == "id" else function.get("name")
            if value is not None:
                value = _shape_str(value, where=f"{where}.{key if key == 'id' else 'function.name'}")
                slot[key] = slot[key] or value
        arguments = function.get("arguments")
        if arguments is not None:
            slot["arguments"].append(_shape_str(arguments, where=f"{where}.function.arguments"))
        return {"index": index, "id": call.get("id"), "name": function.get("name"), "args": arguments or ""}

    def _add_logprobs(self, value: Any, *, where: str) -> None:
        logprobs = _shape_mapping(value, where=where)
        if self._logprobs is None:
            self._logprobs = {}
        for key in ("content", "refusal"):
            if logprobs.get(key) is not None:
                self._logprobs.setdefault(key, []).extend(_shape_list(logprobs[key], where=f"{where}.{key}"))

    def message(self) -> Message:
        """The final AI message of the chunks added so far."""
        raw_calls = []
        for index in sorted(self._calls):
            slot = self._calls[index]
            where = f"stream.tool_calls[{index}]"
            if slot["id"] is None or slot["name"] is None:
                raise ResponseShapeError(where, "a tool call arrived without its id or name")
            raw_calls.append((slot["id"], slot["name"], "".join(slot["arguments"])))
        logprobs = None
        if self._logprobs is not None:
            logprobs = {key: self._logprobs.get(key) for key in ("content", "refusal")}
        return _assemble(
            top=self._top,
            content="".join(self._content),
            raw_calls=raw_calls,
            extras={key: "".join(parts) for key, parts in self._extras.items() if "".join(parts)},
            finish_reason=self._finish_reason,
            logprobs=logprobs,
            usage=self._usage,
            where="stream",
        )


def ai_message_from_chunks(chunks: Iterable[Any]) -> Message:
    """The AI message a sequence of parsed stream chunks adds up to."""
    collector = StreamCollector()
    for chunk in chunks:
        collector.add(chunk)
    return collector.message()


def _assemble(
    *,
    top: Mapping[str, Any],
    content: Any,
    raw_calls: Sequence[tuple[str, str, str]],
    extras: Mapping[str, str],
    finish_reason: Any,
    logprobs: Mapping[str, Any] | None,
    usage: Any,
    where: str,
) -> Message:
    """The one builder behind both paths, so streamed and whole completions cannot drift apart."""
    tool_calls, invalid = [], []
    for call_id, name, arguments in raw_calls:
        args = _parse_arguments(arguments)
        if args is None:
            invalid.append(
                {"id": call_id, "name": name, "args": arguments, "error": "arguments are not a JSON object"}
            )
        else:
            tool_calls.append({"id": call_id, "name": name, "args": args})
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise ResponseShapeError(f"{where}.finish_reason", "must be a string or null")
    metadata: dict[str, Any] = {
        "model_name": top.get("model"),
        "system_fingerprint": top.get("system_fingerprint"),
        "finish_reason": finish_reason,
    }
    metadata.update({key: top[key] for key in _OPTIONAL_METADATA if top.get(key) is not None})
    if logprobs is not None:
        metadata["logprobs"] = dict(logprobs)
    if usage is not None:
        metadata["token_usage"] = dict(_shape_mapping(usage, where=f"{where}.usage"))
    message_id = top.get("id")
    if message_id is not None and not isinstance(message_id, str):
        raise ResponseShapeError(f"{where}.id", "must be a string")
    return ai_message(
        content=content,
        id=message_id,
        additional_kwargs=extras,
        response_metadata=metadata,
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        usage_metadata=_usage_from_wire(usage, where=f"{where}.usage") if usage is not None else None,
    )


def _usage_from_wire(usage: Any, *, where: str) -> dict[str, Any]:
    usage = _shape_mapping(usage, where=where)
    counts: dict[str, Any] = {}
    for ours, theirs in (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens")):
        value = usage.get(theirs, 0)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ResponseShapeError(f"{where}.{theirs}", "must be an integer")
        counts[ours] = value
    total = usage.get("total_tokens", counts["input_tokens"] + counts["output_tokens"])
    if not isinstance(total, int) or isinstance(total, bool):
        raise ResponseShapeError(f"{where}.total_tokens", "must be an integer")
    counts["total_tokens"] = total
    # Cached prompt tokens (a part of the input), where the provider reports them: billed at another price.
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0:
        counts["input_token_details"] = {"cache_read": cached}
    return counts


def _first_choice(value: Any, *, where: str, required: bool) -> Mapping[str, Any] | None:
    choices = _shape_list(value, where=where)
    if not choices:
        if required:
            raise ResponseShapeError(where, "must hold at least one choice")
        return None
    for position, choice in enumerate(choices):
        choice = _shape_mapping(choice, where=f"{where}[{position}]")
        if choice.get("index", 0) == 0:
            return choice
    return None


def _shape_mapping(value: Any, *, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ResponseShapeError(where, "must be an object")
    return value


def _shape_list(value: Any, *, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ResponseShapeError(where, "must be a list")
    return value


def _shape_str(value: Any, *, where: str) -> str:
    if not isinstance(value, str):
        raise ResponseShapeError(where, "must be a string")
    return value
