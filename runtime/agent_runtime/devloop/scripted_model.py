"""An offline stand-in for a model: a loopback chat-completions server that answers from a script.

`agentengine dev --model scripted:FILE` runs it. FILE is a JSON or YAML list of turns, each
`{"text": "..."}` or `{"tool_calls": [{"name": "...", "args": {...}}]}`; one turn answers one completion
request, in order. With the script used up (or no FILE), a deterministic brain answers: a user message
with tools on offer -> a call of the first tool whose schema takes one string, with the user's text; tool
results last -> a text quoting each (`word_count says: {...}`); otherwise `heard: <text>`.

It speaks OpenAI's wire format, whole or streamed (`stream: true`), and listens on loopback only.

    python -m agent_runtime.devloop.scripted_model --port N [--script FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

COMPLETIONS_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
SYSTEM_FINGERPRINT = "fp_scripted01"
_ARGUMENT_PIECE = 7  # characters of tool-call arguments per stream chunk: splits keys and values


class ScriptError(ValueError):
    """The script file cannot be used; the message names the file, the turn and the fix."""


class ScriptedCall(BaseModel):
    """One tool call a scripted turn makes."""

    model_config = ConfigDict(extra="forbid")

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptedTurn(BaseModel):
    """One answer: a text, tool calls, or both; neither lets the brain answer."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    tool_calls: list[ScriptedCall] | None = None


def load_script(path: Path) -> list[ScriptedTurn]:
    """The turns of a JSON or YAML script file."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read the script ({exc.strerror}); give an existing file") from None
    except yaml.YAMLError:
        raise ScriptError(f"{path}: not JSON or YAML; write a list of turns") from None
    if not isinstance(data, list):
        raise ScriptError(f'{path}: expected a list of turns, e.g. [{{"text": "hello"}}]')
    turns = []
    for index, item in enumerate(data):
        try:
            turns.append(ScriptedTurn.model_validate(item))
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"]) or "turn"
            raise ScriptError(
                f"{path}: turn {index}: {where}: {error['msg']} "
                '(a turn is {"text": ...} or {"tool_calls": [{"name": ..., "args": {...}}]})'
            ) from None
    return turns


# The brain ----------------------------------------------------------------------------------------------


def text_of(content: Any) -> str:
    """A message's content as text (a list of parts joined)."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def brain(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, heard: str = "heard"
) -> tuple[str, list[ScriptedCall]]:
    """A deterministic answer to an OpenAI-shaped conversation: (text, tool calls)."""
    last = messages[-1]
    if last.get("role") == "user" and tools:
        text = text_of(last.get("content"))
        for tool in tools:
            function = tool.get("function") or {}
            properties = (function.get("parameters") or {}).get("properties") or {}
            if len(properties) == 1:
                ((prop, schema),) = properties.items()
                if isinstance(schema, dict) and schema.get("type") == "string":
                    return "", [ScriptedCall(name=function["name"], args={prop: text})]
    if last.get("role") == "tool":
        names = {}
        for message in messages:
            for call in message.get("tool_calls") or []:
                names[call.get("id")] = (call.get("function") or {}).get("name", "tool")
        results = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            results.append(
                f"{names.get(message.get('tool_call_id'), 'tool')} says: {text_of(message.get('content'))}"
            )
        return "; ".join(reversed(results)), []
    users = [m for m in messages if m.get("role") == "user"]
    return f"{heard}: {text_of(users[-1].get('content')) if users else ''}", []


# Completions --------------------------------------------------------------------------------------------


@dataclass
class Completion:
    """One answer, rendered either whole or as chunks; both carry the same id, metadata and usage."""

    id: str
    model: str
    created: int
    text: str
    calls: list[tuple[str, str, str]]  # id, name, arguments (JSON text)
    usage: dict[str, Any]
    fingerprint: str = SYSTEM_FINGERPRINT

    @classmethod
    def build(
        cls,
        request: Mapping[str, Any],
        *,
        text: str,
        calls: Iterable[ScriptedCall],
        seed: Any = None,
        completion_id: str | None = None,
        fingerprint: str = SYSTEM_FINGERPRINT,
    ) -> Completion:
        """`seed` (with the request) makes the id: the same request and turn give the same id."""
        key = {k: request.get(k) for k in ("model", "messages", "tools")}
        key["turn"] = seed
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
        completion_id = completion_id or f"chatcmpl-{digest[:24]}"
        rendered = [
            (
                call.id or f"call_{hashlib.sha256(f'{completion_id}/{index}'.encode()).hexdigest()[:24]}",
                call.name,
                json.dumps(call.args),
            )
            for index, call in enumerate(calls)
        ]
        prompt = sum(1 + len(text_of(m.get("content")).split()) for m in request["messages"])
        output = len(text.split()) + sum(1 + len(args) // 4 for _, _, args in rendered)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        return cls(completion_id, request["model"], int(time.time()), text, rendered, usage, fingerprint)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.calls else "stop"

    def _top(self, obj: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "service_tier": "default",
            "system_fingerprint": self.fingerprint,
        }

    def whole(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.text if self.text or not self.calls else None,
            "refusal": None,
            "annotations": [],
        }
        if self.calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in self.calls
            ]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason}
        return {**self._top("chat.completion"), "choices": [choice], "usage": self.usage}

    def chunks(self, *, include_usage: bool) -> list[dict[str, Any]]:
        """OpenAI's chunk sequence for this answer (without the final `[DONE]`)."""

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            out = {
                **self._top("chat.completion.chunk"),
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if include_usage:
                out["usage"] = None
            return out

        first: dict[str, Any] = {"role": "assistant", "content": "" if self.text or not self.calls else None}
        first["refusal"] = None
        out = [chunk(first)]
        out += [chunk({"content": piece}) for piece in re.findall(r"\s*\S+", self.text)]
        for index, (call_id, name, arguments) in enumerate(self.calls):
            head = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            out.append(chunk({"tool_calls": [head]}))
            for start in range(0, len(arguments), _ARGUMENT_PIECE):
                piece = arguments[start : start + _ARGUMENT_PIECE]
                out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        out.append(chunk({}, self.finish_reason))
        if include_usage:
            out.append({**self._top("chat.completion.chunk"), "choices": [], "usage": self.usage})
        return out


def request_problem(request: Any) -> str | None:
    """What is wrong with a chat-completions request body, in OpenAI's words, or None."""
    if not isinstance(request, dict):
        return "We could not parse the JSON body of your request."
    if not isinstance(request.get("model"), str) or not request["model"]:
        return "you must provide a model parameter"
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
        ):
            return f"Invalid value for 'messages[{index}].role'."
    if request.get("tools") is not None and not isinstance(request["tools"], list):
        return "'tools' must be an array"
    return None


# The server ---------------------------------------------------------------------------------------------


class ScriptedModel:
    """The script and the answers; thread-safe, so a test may push turns while it serves."""

    def __init__(self, turns: Iterable[ScriptedTurn] = ()) -> None:
        self._turns: deque[ScriptedTurn] = deque(turns)
        self._lock = threading.Lock()

    def next_turn(self) -> ScriptedTurn:
        with self._lock:
            return self._turns.popleft() if self._turns else ScriptedTurn()

    def complete(self, request: Mapping[str, Any]) -> Completion:
        turn = self.next_turn()
        text, calls = turn.text, turn.tool_calls
        if text is None and calls is None:
            text, calls = brain(list(request["messages"]), request.get("tools"))
        return Completion.build(request, text=text or "", calls=calls or [], seed=turn.model_dump())


def make_app(model: ScriptedModel) -> Any:
    """The ASGI app: `POST /v1/chat/completions` and `GET /v1/models`."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    def error(status: int, message: str, code: str) -> Response:
        body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
        return JSONResponse(body, status_code=status)

    async def completions(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        if problem := request_problem(body):
            return error(400, problem, "invalid_request")
        completion = model.complete(body)
        if not body.get("stream"):
            return JSONResponse(completion.whole())
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def events() -> AsyncIterator[bytes]:
            for chunk in completion.chunks(include_usage=include_usage):
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(_: Request) -> Response:
        entry = {"id": "scripted", "object": "model", "created": 0, "owned_by": "agent-engine"}
        return JSONResponse({"object": "list", "data": [entry]})

    return Starlette(
        routes=[
            Route(COMPLETIONS_PATH, completions, methods=["POST"]),
            Route(MODELS_PATH, models, methods=["GET"]),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(description="An offline chat-completions stand-in, on loopback")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--script", type=Path, default=None, help="a JSON or YAML list of turns")
    args = parser.parse_args(argv)
    try:
        turns = load_script(args.script) if args.script is not None else []
    except ScriptError as exc:
        parser.exit(2, f"error: {exc}\n")
    uvicorn.run(
        make_app(ScriptedModel(turns)),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
