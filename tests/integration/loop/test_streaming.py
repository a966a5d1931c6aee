"""Streaming end to end (issue 32): the model's tokens reach an SSE client of the OE as they happen.

Real processes: the OE, the AER and the Tool Pod of the loop tier (one set for the module), and the
loopback chat-completions peer streaming slowly on demand (a turn's last chunk waits for a file).
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.llm_delta import joined
from agent_runtime.protocol import LLMDelta
from tests.conftest import Process
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, LLM_KEY, PLANTED, RUNTIME_TOKEN, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import RunningLLMPeer, Turn, running_llm_peer

pytestmark = pytest.mark.integration

EVENT_BUFFER = 64


@pytest.fixture(scope="module")
def llm_peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as peer:
        yield peer


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process], llm_peer: RunningLLMPeer
) -> Iterator[Platform]:
    with running_echo_provider() as provider:
        platform = Platform(
            tmp=tmp_path_factory.mktemp("streaming"),
            spawn=module_spawn,
            llm_base_url=llm_peer.base_url,
            provider_url=provider.url,
        )
        platform.start_tool_pod()
        platform.start_aer()
        platform.write_registrations()
        platform.start_oe(extra={"OE_EVENT_BUFFER": str(EVENT_BUFFER)})
        yield platform


@pytest.fixture(autouse=True)
def _fresh_script(llm_peer: RunningLLMPeer) -> None:
    llm_peer.reset()


def invoke(platform: Platform, task: Any, **more: Any) -> str:
    with platform.client() as client:
        response = client.post("/invoke", json={"agent": AGENT, "input": task, **more})
    assert response.status_code == 202, response.text
    return str(response.json()["execution_id"])


def sse_events(
    platform: Platform, execution_id: str, *, last_event_id: int | None = None, stop: int | None = None
) -> Iterator[tuple[str, dict[str, Any], bytes]]:
    """(event type, record, raw frame) of each event until the stream ends (or `stop` events)."""
    headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    if last_event_id is not None:
        headers["last-event-id"] = str(last_event_id)
    seen = 0
    with (
        httpx.Client(base_url=platform.oe_url, timeout=30) as client,
        client.stream("GET", f"/execution/{execution_id}/events", headers=headers) as stream,
    ):
        assert stream.status_code == 200
        frame: list[str] = []
        for line in stream.iter_lines():
            if line:
                frame.append(line)
                continue
            if not frame or frame[0].startswith(":"):
                frame = []
                continue
            fields = dict(part.split(": ", 1) for part in frame)
            raw = ("\n".join(frame)).encode()
            frame = []
            yield fields["event"], json.loads(fields["data"]), raw
            seen += 1
            if stop is not None and seen >= stop:
                return


def cached_step(platform: Platform, execution_id: str, step: int) -> dict[str, Any]:
    """The replay cache's entry, read from the OE's own SQLite file."""
    path = platform.tmp / "oe" / "oe.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        row = db.execute(
            "SELECT record FROM steps WHERE execution_id = ? AND step = ?", (execution_id, step)
        ).fetchone()
    assert row is not None, f"no step {step} cached"
    return dict(json.loads(row[0]))


def deltas_by_step(records: list[dict[str, Any]]) -> dict[int, list[LLMDelta]]:
    out: dict[int, list[LLMDelta]] = {}
    for record in records:
        if record["type"] == "llm_delta":
            out.setdefault(record["step"], []).append(LLMDelta.model_validate(record["data"]))
    return out


def as_cached(message: dict[str, Any]) -> dict[str, Any]:
    """The fields a client rebuilds from deltas, taken from a cached final message."""
    metadata = message.get("response_metadata") or {}
    return {
        "id": message.get("id"),
        "text": message.get("content"),
        "tool_calls": [
            {"id": call["id"], "name": call["name"], "args": call["args"]} for call in message["tool_calls"]
        ],
        "finish_reason": metadata.get("finish_reason"),
        "usage": message.get("usage_metadata"),
    }


def test_the_first_delta_arrives_before_the_model_has_finished_and_the_cache_equals_the_deltas(
    platform: Platform, llm_peer: RunningLLMPeer, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    words = " ".join(f"word{i}" for i in range(30))
    llm_peer.push(
        Turn.calls(("shout", {"text": "stream me"}), hold_last_until=str(release)),
        Turn.answer(words, chunk_delay_s=0.01),
    )
    execution_id = invoke(platform, {"mode": "llm", "text": "hello"}, stream=True)
    records: list[dict[str, Any]] = []
    for kind, record, _ in sse_events(platform, execution_id):
        records.append(record)
        if kind == "llm_delta" and not release.exists():
            # The peer holds its last chunk until this file exists: the delta came while it streamed.
            assert record["step"] == 1 and record["data"]["index"] == 0
            release.write_text("go")
    assert release.exists(), "no llm_delta reached the client"
    assert records[-1]["type"] == "completed"
    by_step = deltas_by_step(records)
    assert sorted(by_step) == [1, 3]  # two model calls around the shout tool at step 2
    for step, deltas in by_step.items():
        assert [d.index for d in deltas] == list(range(len(deltas)))
        assert [d.last for d in deltas].count(True) == 1 and deltas[-1].last
        assert not any(d.from_cache for d in deltas)
        cached = cached_step(platform, execution_id, step)
        assert cached["state"] == "done"
        rebuilt = joined(deltas)
        rebuilt.pop("extra")
        assert rebuilt == as_cached(cached["outcome"]["result"]), f"step {step}"
    assert len(by_step[3]) > 10  # the text came as many deltas, not one
    assert joined(by_step[3])["text"] == words
    assert joined(by_step[1])["tool_calls"][0]["args"] == {"text": "stream me"}
    assert by_step[3][-1].usage is not None and by_step[3][-1].finish_reason == "stop"
    # step_finished carries the step's result as the client may see it.
    shout = next(r for r in records if r["type"] == "step_finished" and r["step"] == 2)
    assert shout["data"]["result"] == {"loud": "STREAM ME"} and shout["data"]["truncated"] is False


def test_a_resume_replays_a_cached_model_step_as_one_delta(
    platform: Platform, llm_peer: RunningLLMPeer
) -> None:
    llm_peer.push(Turn.calls(("transfer", {"amount": 5, "to": "bob"})), Turn.answer("sent five"))
    execution_id = invoke(platform, {"mode": "llm", "text": "pay bob"}, stream=True)
    assert platform.wait(execution_id, "suspended")["status"] == "suspended"
    with platform.client() as client:
        answer = client.post(f"/resume/{execution_id}", json={"human_review": {"decision": "approved"}})
    assert answer.status_code == 202, answer.text
    assert platform.wait(execution_id)["status"] == "completed"
    records = [r for _, r, _ in sse_events(platform, execution_id)]
    step1 = [r for r in records if r["type"] == "llm_delta" and r["step"] == 1]
    live, replayed = (
        [d for d in step1 if not d["data"].get("from_cache")],
        [d for d in step1 if d["data"].get("from_cache")],
    )
    assert live and len(replayed) == 1  # the first run streamed it; the resumed run replayed it whole
    whole = LLMDelta.model_validate(replayed[0]["data"])
    assert whole.last and whole.index == 0
    assert joined([whole]) | {"extra": {}} == joined([LLMDelta.model_validate(d["data"]) for d in live]) | {
        "extra": {}
    }
    assert whole.tool_calls[0].name == "transfer"


def test_a_secret_split_across_chunks_appears_in_no_delta(
    platform: Platform, llm_peer: RunningLLMPeer
) -> None:
    # Tool-call arguments stream in 7-character pieces: each planted value is cut across chunks.
    llm_peer.push(
        Turn.calls(
            ("shout", {"text": f"key {LLM_KEY} and token {RUNTIME_TOKEN} end"}),
            ("shout", {"text": f"url-encoded {LLM_KEY.replace('-', '%2D')} too"}),
        ),
        Turn.answer("done"),
    )
    execution_id = invoke(platform, {"mode": "llm", "text": "leak"}, stream=True)
    raw = b""
    records = []
    for _, record, frame in sse_events(platform, execution_id):
        raw += frame
        records.append(record)
    assert records[-1]["type"] == "completed"
    deltas = deltas_by_step(records)[1]
    # The peer streamed it (its chunks cut each value in 7-character pieces); the OE may have merged
    # pieces that reached it together, never a secret's halves into clear text.
    assert next(r.body.get("stream") for r in llm_peer.requests if r.path.endswith("/chat/completions"))
    # What a client rebuilds from the pieces (each SSE event alone never holds a whole split value).
    rebuilt = "".join(d.text + "".join(c.arguments for c in d.tool_calls) for d in deltas)
    for secret in PLANTED:
        assert secret.encode() not in raw
        assert secret not in rebuilt and secret not in rebuilt.replace("%2D", "-")
    assert b"sk-loop-llm-key" not in raw and b"loop-runtime-token" not in raw  # no prefix leaked either
    args = [call["args"]["text"] for call in joined(deltas)["tool_calls"]]
    assert args == ["key [REDACTED] and token [REDACTED] end", "url-encoded [REDACTED] too"]


def test_a_client_that_reconnects_with_last_event_id_misses_nothing_and_sees_nothing_twice(
    platform: Platform, llm_peer: RunningLLMPeer
) -> None:
    llm_peer.push(Turn.answer(" ".join(f"w{i}" for i in range(60)), chunk_delay_s=0.01))
    execution_id = invoke(platform, {"mode": "astream", "text": "count"}, stream=True)
    seqs: list[int] = []
    last: int | None = None
    rounds = 0
    while True:
        rounds += 1
        got = list(sse_events(platform, execution_id, last_event_id=last, stop=7))
        seqs += [record["seq"] for _, record, _ in got]
        last = seqs[-1]
        if got[-1][0] in ("completed", "failed", "cancelled") or len(got) < 7:
            break
    assert rounds > 3
    everything = [record["seq"] for _, record, _ in sse_events(platform, execution_id)]
    assert seqs == everything == list(range(1, len(everything) + 1))
    view = platform.wait(execution_id)
    assert view["status"] == "completed" and view["result"]["chunks"] == 1


def _stalled_reader(platform: Platform, execution_id: str) -> socket.socket:
    """An SSE client that sends its request and then never reads (a small receive buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.connect(("127.0.0.1", platform.oe_port))
    sock.sendall(
        f"GET /execution/{execution_id}/events HTTP/1.1\r\nHost: oe\r\n"
        f"Authorization: Bearer {CLIENT_TOKEN}\r\n\r\n".encode()
    )
    return sock


def _timed_run(
    platform: Platform, task: dict[str, Any], *, stall: bool
) -> tuple[float, socket.socket | None]:
    started = time.monotonic()
    execution_id = invoke(platform, task, stream=True)
    sock = _stalled_reader(platform, execution_id) if stall else None
    assert platform.wait(execution_id, timeout=60)["status"] == "completed"
    return time.monotonic() - started, sock


def test_a_stalled_client_does_not_slow_the_run(platform: Platform, llm_peer: RunningLLMPeer) -> None:
    """Runs with a reader that never reads beside runs without, interleaved. (The buffer limit and the
    resume mark are tested on the bus itself: tests/integration/oe/test_event_stream.py.)"""
    text = " ".join(f"token{i}-{'x' * 40}" for i in range(600))  # ~600 deltas of ~300 bytes each
    durations: dict[bool, list[float]] = {False: [], True: []}
    sockets = []
    try:
        for stall in (False, True, False, True):
            llm_peer.push(Turn.answer(text))
            duration, sock = _timed_run(platform, {"mode": "astream", "text": "go"}, stall=stall)
            durations[stall].append(duration)
            if sock is not None:
                sockets.append(sock)
        # Not a benchmark: a run the stalled reader held up would hit its 60 s timeout or take several
        # times as long; the figures are bench_stream's.
        assert max(durations[True]) < 3 * max(durations[False]) + 2.0, durations
        for sock in sockets:
            sock.setblocking(False)
            assert sock.recv(1), "the stalled reader's stream is open and holds events"
    finally:
        for sock in sockets:
            sock.close()


def test_cancel_stops_the_provider_stream_and_the_audit_keeps_the_partial_text(
    platform: Platform, llm_peer: RunningLLMPeer, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    text = " ".join(f"slow{i}" for i in range(200))
    llm_peer.push(Turn.answer(text, chunk_delay_s=0.05, gone_file=str(gone)))
    execution_id = invoke(platform, {"mode": "astream", "text": "go"}, stream=True)
    seen: list[str] = []
    for kind, record, _ in sse_events(platform, execution_id):
        if kind == "llm_delta":
            seen.append(record["data"]["text"])
            if len(seen) == 5:
                # A second client cancels; this one keeps reading: the run's end reaches it.
                with platform.client() as client:
                    assert client.post(f"/execution/{execution_id}/cancel").status_code == 200
    cancelled_at = time.monotonic()
    deadline = cancelled_at + 10
    while not gone.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone.exists(), platform.outputs()[-6000:]
    sent = int(gone.read_text())
    assert sent < 100  # of ~200 chunks at 50 ms: stopped at once, not run to the end
    assert platform.wait(execution_id)["status"] == "cancelled"
    deadline = time.monotonic() + 10
    partial = None
    while partial is None and time.monotonic() < deadline:
        partial = next(
            (r.get("partial_text") for r in platform.audit(execution_id) if r.get("partial_text")), None
        )
        time.sleep(0.1)
    assert partial is not None and partial.startswith("".join(seen))
    assert len(partial) < len(text)


def test_a_client_going_away_does_not_cancel_the_run(platform: Platform, llm_peer: RunningLLMPeer) -> None:
    llm_peer.push(Turn.answer(" ".join(f"n{i}" for i in range(40)), chunk_delay_s=0.02))
    execution_id = invoke(platform, {"mode": "astream", "text": "go"}, stream=True)
    got = list(sse_events(platform, execution_id, stop=3))  # then hang up
    assert len(got) == 3
    view = platform.wait(execution_id)
    assert view["status"] == "completed" and view["result"]["answer"].startswith("n0 n1")


def test_without_stream_no_delta_is_published_and_results_can_be_kept_out(
    platform: Platform, llm_peer: RunningLLMPeer
) -> None:
    llm_peer.push(Turn.calls(("shout", {"text": "quiet"})), Turn.answer("ok"))
    execution_id = invoke(platform, {"mode": "llm", "text": "x"}, step_results=False)
    records = [r for _, r, _ in sse_events(platform, execution_id)]
    assert records[-1]["type"] == "completed"
    assert not [r for r in records if r["type"] == "llm_delta"]
    finished = [r for r in records if r["type"] == "step_finished"]
    assert finished and all("result" not in r["data"] and "error" not in r["data"] for r in finished)


def test_bad_stream_fields_are_a_400_naming_the_field(platform: Platform) -> None:
    with platform.client() as client:
        for body, field in (
            ({"stream": "yes please"}, "stream"),
            ({"stream_mode": "tokens"}, "stream_mode"),
            ({"step_results": 3}, "step_results"),
        ):
            response = client.post("/invoke", json={"agent": AGENT, "input": {}, **body})
            assert response.status_code == 400, response.text
            assert field in response.text


def test_an_agent_that_calls_astream_gets_its_call_streamed_without_the_client_asking(
    platform: Platform, llm_peer: RunningLLMPeer
) -> None:
    llm_peer.push(Turn.answer("one two three four"))
    execution_id = invoke(platform, {"mode": "astream", "text": "go"})  # no stream: true
    records = [r for _, r, _ in sse_events(platform, execution_id)]
    assert records[-1]["type"] == "completed"
    assert joined(deltas_by_step(records)[1])["text"] == "one two three four"
