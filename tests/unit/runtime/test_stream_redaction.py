"""Redaction on a window across a stream's pieces (issue 32), and the deltas built on it."""

from __future__ import annotations

import base64
import json
import random
import urllib.parse

import pytest

from agent_runtime.llm_delta import DeltaStream, joined, merged
from agent_runtime.oe.step_content import step_content
from agent_runtime.protocol import CallError
from agent_runtime.redaction import redactor_for
from agent_runtime.stream_redaction import WindowRedactor

pytestmark = pytest.mark.unit

SECRET = "sk-live-0a9f3e71c0ffee"
OTHER = "tok-5be1c0de-77aa01"
REDACTOR = redactor_for([SECRET, OTHER])

TEXTS = [
    f"the key is {SECRET} and that is all",
    f"{SECRET}{OTHER}",
    f"quoted: {urllib.parse.quote(SECRET + '/x')} end",
    f"json: {json.dumps({'k': SECRET})[1:-1]}",
    "basic " + base64.b64encode(f"user:{SECRET}".encode()).decode() + " done",
    f"hex {SECRET.encode().hex()} done",
    "nothing secret here, only sk- and tok- prefixes: sk-live tok-5be",
    f"ends with the secret {SECRET}",
]


def _streamed(text: str, rng: random.Random) -> list[str]:
    window = WindowRedactor(REDACTOR)
    out, at = [], 0
    while at < len(text):
        size = rng.randint(1, 9)
        out.append(window.push(text[at : at + size]))
        at += size
    out.append(window.flush())
    return out


@pytest.mark.parametrize("text", TEXTS)
def test_pieces_joined_are_the_whole_text_redacted_and_no_piece_holds_a_secret(text: str) -> None:
    rng = random.Random(32)
    for _ in range(60):
        pieces = _streamed(text, rng)
        assert "".join(pieces) == REDACTOR.text(text)
        for piece in pieces:
            assert SECRET not in piece and OTHER not in piece
        # Nor any long prefix of one: what went out before the secret completed stops short of it.
        assert all("sk-live-0a9f" not in piece for piece in pieces)


def test_per_chunk_redaction_would_leak_what_the_window_catches() -> None:
    """The weakened build: each piece redacted alone lets the halves of a split secret through."""
    half = len(SECRET) // 2
    pieces = ["key ", SECRET[:half], SECRET[half:], " end"]
    per_chunk = "".join(REDACTOR.text(piece) for piece in pieces)
    assert SECRET in per_chunk
    window = WindowRedactor(REDACTOR)
    windowed = "".join([*(window.push(piece) for piece in pieces), window.flush()])
    assert windowed == "key [REDACTED] end"


def test_plain_text_goes_out_at_once() -> None:
    window = WindowRedactor(REDACTOR)
    assert window.push("hello wor") == "hello wor"
    assert window.push("ld, more text.") == "ld, more text."
    assert window.held == 0
    assert window.push(" then sk-li") == " then "  # the start of a secret waits
    assert window.held == len("sk-li")
    assert window.push("ke a dog.") == "sk-like a dog."  # it was not one after all


def test_no_secrets_no_holding() -> None:
    window = WindowRedactor(redactor_for([]))
    assert window.push("sk-") == "sk-" and window.flush() == ""


def _chunk(content: str = "", *, calls: list[dict[str, object]] | None = None) -> dict[str, object]:
    return {
        "type": "llm_chunk",
        "id": "chatcmpl-1",
        "content": content,
        "additional_kwargs": {},
        "tool_call_chunks": calls or [],
    }


def test_a_stream_of_deltas_joins_to_the_final_message_and_the_last_has_usage() -> None:
    stream = DeltaStream(REDACTOR, step=4)
    arguments = json.dumps({"text": f"say {SECRET} now"})
    events = [_chunk("Hel"), _chunk("lo "), _chunk(SECRET[:5]), _chunk(SECRET[5:]), _chunk(" bye")]
    events.append(_chunk(calls=[{"index": 0, "id": "call_1", "name": "shout", "args": ""}]))
    events += [
        _chunk(calls=[{"index": 0, "args": arguments[i : i + 7]}]) for i in range(0, len(arguments), 7)
    ]
    deltas = [d for d in (stream.chunk(e) for e in events) if d is not None]
    usage = {"input_tokens": 3, "output_tokens": 9, "total_tokens": 12}
    deltas.append(stream.end(finish_reason="tool_calls", usage=usage, id="chatcmpl-1"))
    assert [d.index for d in deltas] == list(range(len(deltas)))
    assert all(d.step == 4 for d in deltas) and deltas[-1].last and not any(d.last for d in deltas[:-1])
    whole = joined(deltas)
    assert whole["text"] == "Hello [REDACTED] bye"
    assert whole["tool_calls"] == [{"id": "call_1", "name": "shout", "args": {"text": "say [REDACTED] now"}}]
    assert whole["usage"] == usage and whole["finish_reason"] == "tool_calls" and whole["id"] == "chatcmpl-1"
    assert all(SECRET[:8] not in d.model_dump_json() for d in deltas)


def test_relaying_deltas_redacts_again_with_the_next_hops_secrets() -> None:
    first = DeltaStream(redactor_for([]), step=1)  # a hop that knows no secret
    out = [first.chunk(_chunk(piece)) for piece in ("a ", OTHER[:6], OTHER[6:], " b")]
    out.append(first.end(finish_reason="stop", usage=None))
    second = DeltaStream(REDACTOR, step=1)
    relayed = [r for r in (second.relay(d) for d in out if d is not None) if r is not None]
    assert joined(relayed)["text"] == "a [REDACTED] b"
    assert relayed[-1].last and relayed[-1].finish_reason == "stop"


def test_a_cached_message_is_one_delta_from_cache() -> None:
    message = {
        "type": "ai",
        "id": "m-1",
        "content": "hi",
        "tool_calls": [{"id": "c1", "name": "shout", "args": {"text": "x"}}],
        "response_metadata": {"finish_reason": "tool_calls"},
        "usage_metadata": {"total_tokens": 5},
    }
    delta = DeltaStream(REDACTOR, step=2).whole(message, from_cache=True)
    assert delta.from_cache and delta.last and delta.index == 0
    assert joined([delta]) == {
        "id": "m-1",
        "text": "hi",
        "extra": {},
        "tool_calls": [{"id": "c1", "name": "shout", "args": {"text": "x"}}],
        "finish_reason": "tool_calls",
        "usage": {"total_tokens": 5},
    }


def test_step_content_redacts_masks_and_caps() -> None:
    shown = step_content(result={"api_key": "abc", "note": f"has {SECRET}"}, error=None, secrets=[SECRET])
    assert shown == {"result": {"api_key": "[REDACTED]", "note": "has [REDACTED]"}, "truncated": False}
    big = step_content(result={"blob": "x" * 5000}, error=None, secrets=[], max_bytes=100)
    assert big["truncated"] is True and len(big["result"].encode()) <= 100 and big["bytes"] > 5000
    failed = step_content(
        result=None, error=CallError(category="tool_error", explanation=f"bad {SECRET}"), secrets=[SECRET]
    )
    assert failed["error"]["explanation"] == "bad [REDACTED]" and failed["truncated"] is False


def test_deltas_that_arrived_together_merge_into_one_with_the_same_joined_message() -> None:
    stream = DeltaStream(redactor_for([]), step=3)
    pieces = [
        _chunk("a "),
        _chunk("b "),
        _chunk(calls=[{"index": 0, "id": "c1", "name": "shout", "args": '{"te'}]),
        _chunk(
            calls=[{"index": 0, "args": 'xt": "x"}'}, {"index": 1, "id": "c2", "name": "n", "args": "{}"}]
        ),
    ]
    deltas = [d for d in (stream.chunk(p) for p in pieces) if d is not None]
    deltas.append(stream.end(finish_reason="tool_calls", usage={"total_tokens": 4}))
    whole = joined(deltas)
    one = merged(deltas[1:], index=1)
    assert one.index == 1 and one.last and one.finish_reason == "tool_calls"
    assert joined([deltas[0], one]) == whole
    assert [c.index for c in one.tool_calls] == [0, 1]
