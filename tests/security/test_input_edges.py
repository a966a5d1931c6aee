"""Issue 27, findings 4 and 5, replayed as attacks on real processes: bad input is a 4xx naming the field.

Every component is the launcher in its mode (the OE, the AER and the Tool Pod of the loop platform, and a
Memory server), on loopback, with a short BODY_TIMEOUT_S so the slow-body attack takes a second. Then a
bounded fuzz run (hypothesis, derandomized) over each server's request models asserts no 500.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_runtime.memory.wire import (
    ListBody,
    NamespacesBody,
    SearchBody,
    SubtreeBody,
    SummarizeBody,
    WriteBody,
)
from agent_runtime.protocol import (
    AERExecuteRequest,
    DrainRequest,
    ExecutorCallback,
    InterruptCallRequest,
    InvokeLLMRequest,
    InvokeRequest,
    MemoryExportRequest,
    ReviewDecision,
    ToolExecuteRequest,
    ToolPodExecuteRequest,
    ToolResultRequest,
    WrappedResume,
)
from tests.conftest import REPO_ROOT, Process
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, LLM_KEY, RUNTIME_TOKEN, Platform
from tests.integration.memory.launched import MemoryServer, start_memory
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

pytestmark = [pytest.mark.security, pytest.mark.timeout(240)]

BODY_TIMEOUT_S = 1.5
APP_ID = AGENT.replace("/", ".")
PROJECT = AGENT.split("/")[0]


class EdgePlatform(Platform):
    """The loop platform with a short body timeout on every component; `runtime/` first on PYTHONPATH, so
    a copy of the tree (a deliberately weakened build) runs its own code, not the installed one."""

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        env["BODY_TIMEOUT_S"] = str(BODY_TIMEOUT_S)
        env["PYTHONPATH"] = f"{REPO_ROOT / 'runtime'}:{env['PYTHONPATH']}"
        return env

    def start_oe(self, *, extra: dict[str, str] | None = None) -> None:
        edge = {"BODY_TIMEOUT_S": str(BODY_TIMEOUT_S), "PYTHONPATH": f"{REPO_ROOT / 'runtime'}:{REPO_ROOT}"}
        super().start_oe(extra={**edge, **(extra or {})})


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process]
) -> Iterator[Platform]:
    with running_llm_peer(api_key=LLM_KEY) as peer, running_echo_provider() as provider:
        yield EdgePlatform(
            tmp=tmp_path_factory.mktemp("platform"),
            spawn=module_spawn,
            llm_base_url=peer.base_url,
            provider_url=provider.url,
        ).start()


@pytest.fixture(scope="module")
def memory_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("memory")


@pytest.fixture(scope="module")
def memory(memory_dir: Path, module_spawn: Callable[..., Process]) -> MemoryServer:
    extra = {"BODY_TIMEOUT_S": str(BODY_TIMEOUT_S), "PYTHONPATH": f"{REPO_ROOT / 'runtime'}:{REPO_ROOT}"}
    return start_memory(module_spawn, memory_dir, app_id=APP_ID, extra=extra)


@pytest.fixture(scope="module")
def execution_id(platform: Platform) -> str:
    """An execution that exists (its entrypoint fails at once: an unknown mode)."""
    return platform.invoke({"mode": "none"})


def _fields(response: httpx.Response) -> list[str]:
    body = response.json()
    return [problem["field"] for problem in body["detail"]]


def _runtime(platform: Platform) -> httpx.Client:
    return httpx.Client(
        base_url=platform.oe_url, headers={"authorization": f"Bearer {RUNTIME_TOKEN}"}, timeout=30
    )


# Finding 4: the OE ------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [2**63, 2**63 - 1, 2**31, 0, -1])
def test_a_step_past_what_the_store_holds_is_a_400_naming_step(platform: Platform, step: int) -> None:
    with _runtime(platform) as client:
        execute = client.post(
            "/tool/execute", json={"execution_id": "exec-1", "step": step, "tool": "shout", "args": {}}
        )
        result = client.post(
            "/tool/result", json={"execution_id": "exec-1", "step": step, "status": "success", "result": 1}
        )
    for response in (execute, result):
        assert response.status_code == 400, response.text
        assert _fields(response) == ["step"], response.text


def test_a_resume_body_nested_10000_deep_is_a_400_naming_the_field(platform: Platform) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    gateway = f"/api/v1/projects/{PROJECT}/executions/exec-1/resume"
    with platform.client() as client:
        flat = client.post(gateway, content=f'{{"decision": "approved", "args": {deep}}}')
        wrapped = client.post("/resume/exec-1", content=f'{{"human_review": {deep}}}')
        bare = client.post(gateway, content=deep)
    assert flat.status_code == 400, flat.text
    assert _fields(flat) == ["args"]
    # The internal route may be off the client listener (issue 27); where it answers, it is a 400 too.
    if wrapped.status_code != 404:
        assert wrapped.status_code == 400, wrapped.text
        assert _fields(wrapped) == ["human_review"]
    assert bare.status_code == 400, bare.text
    assert _fields(bare) == ["(body)"]


def _cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    ["garbage", "%%%", _cursor([1.0]), _cursor(["x", 1.0]), _cursor([1.0, "\ud800"]), _cursor([1e999, "x"])],
    ids=["word", "symbols", "short", "swapped", "lone-surrogate", "infinite"],
)
def test_a_forged_cursor_is_a_400_naming_cursor(platform: Platform, cursor: str) -> None:
    with platform.client() as client:
        listed = client.get("/executions", params={"cursor": cursor})
        reviews = client.get(f"/api/v1/projects/{PROJECT}/reviews", params={"cursor": cursor})
    for response in (listed, reviews):
        assert response.status_code == 400, response.text
        assert _fields(response) == ["cursor"]


@pytest.mark.parametrize("raw", ["²", "-1", "1e3", str(2**31), "0x10"])
def test_a_limit_that_is_not_a_small_number_is_a_400_naming_limit(platform: Platform, raw: str) -> None:
    with platform.client() as client:
        listed = client.get("/executions", params={"limit": raw})
        reviews = client.get(f"/api/v1/projects/{PROJECT}/reviews", params={"limit": raw})
    for response in (listed, reviews):
        assert response.status_code == 400, response.text
        assert _fields(response) == ["limit"]


def test_an_event_id_past_int64_is_a_400_naming_it(platform: Platform, execution_id: str) -> None:
    path = f"/execution/{execution_id}/events"
    with platform.client() as client:
        after = client.get(path, params={"after": str(2**64)})
        header = client.get(path, headers={"last-event-id": str(2**64)})
        garbage = client.get(path, params={"after": "x1"})
        # In range: the stream answers 200 and replays from the start.
        with client.stream("GET", path, params={"after": "0"}) as fine:
            assert fine.status_code == 200
            first = next(fine.iter_lines())
    assert after.status_code == 400 and _fields(after) == ["after"], after.text
    assert header.status_code == 400 and _fields(header) == ["last-event-id"], header.text
    assert garbage.status_code == 400 and _fields(garbage) == ["after"], garbage.text
    assert first.startswith(("id:", ":")), first


def test_an_interrupt_step_past_what_an_execution_takes_is_a_400_naming_step(
    platform: Platform, execution_id: str
) -> None:
    with platform.client() as client:
        asked = client.post(f"/execution/{execution_id}/interrupt", json={"step": 2**63 - 1})
        status = client.get(f"/execution/{execution_id}/interrupts/{2**64}")
    for response in (asked, status):
        assert response.status_code == 400, response.text
        assert _fields(response) == ["step"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"agent": AGENT, "input": {"n": 2**64}}, "input"),
        ({"agent": AGENT, "input": "x", "user_id": 1e999}, "user_id"),
    ],
)
def test_numbers_no_store_holds_are_a_400_naming_the_field(
    platform: Platform, body: dict[str, Any], field: str
) -> None:
    with platform.client() as client:
        response = client.post("/invoke", content=json.dumps(body))
    assert response.status_code == 400, response.text
    assert _fields(response) == [field]


# Finding 4: a body that never completes, on every component --------------------------------------------


def _slow_body(url: str, path: str, token: str) -> tuple[int, dict[str, Any], float]:
    """Send the headers and half the declared body, then nothing: the status, body and seconds to answer."""
    host, port = url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=BODY_TIMEOUT_S + 10) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"execution_id": "e')
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < 20:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    elapsed = time.monotonic() - started
    status = int(answer.split(b" ", 2)[1])
    return status, json.loads(answer.partition(b"\r\n\r\n")[2]), elapsed


def test_a_body_that_never_completes_is_a_408_on_every_component(
    platform: Platform, memory: MemoryServer
) -> None:
    targets = {
        "oe runtime API": (platform.oe_url, "/tool/execute", RUNTIME_TOKEN),
        "oe client API": (platform.oe_url, "/invoke", CLIENT_TOKEN),
        "aer": (f"http://127.0.0.1:{platform.aer_port}", "/execute", RUNTIME_TOKEN),
        "tool pod": (f"http://127.0.0.1:{platform.tool_port}", "/execute", RUNTIME_TOKEN),
        "memory": (memory.base_url, "/memory/semantic/list", memory.token),
    }
    for name, (url, path, token) in targets.items():
        status, body, elapsed = _slow_body(url, path, token)
        assert status == 408, (name, body)
        assert body["detail"][0]["field"] == "(body)", (name, body)
        assert BODY_TIMEOUT_S - 0.2 < elapsed < BODY_TIMEOUT_S + 3, (name, elapsed)


# Finding 5: Memory ---------------------------------------------------------------------------------------


def _memory(memory: MemoryServer) -> httpx.Client:
    return memory.client()


@pytest.mark.parametrize("offset", [2**63, 2**63 - 1, 2**31])
def test_a_memory_offset_past_what_the_store_holds_is_a_400_naming_offset(
    memory: MemoryServer, offset: int
) -> None:
    with _memory(memory) as client:
        listed = client.post("/memory/semantic/list", json={"namespace": "notes", "offset": offset})
        names = client.post("/memory/semantic/namespaces", json={"offset": offset})
        searched = client.post("/memory/semantic/search", json={"namespace": "notes", "offset": offset})
    for response in (listed, names, searched):
        assert response.status_code == 400, response.text
        assert _fields(response) == ["offset"], response.text


def test_occurred_at_1e308_is_refused_and_summarize_still_works(memory: MemoryServer) -> None:
    session = "edge-session"
    with _memory(memory) as client:
        good = client.post(
            "/memory/episodic/records",
            json={"namespace": "chat", "content": "the user asked about invoices", "session_id": session},
        )
        assert good.status_code == 201, good.text
        for when in (1e308, 253_402_300_800.0, -1):
            bad = client.post(
                "/memory/episodic/records",
                json={"namespace": "chat", "content": "late", "session_id": session, "occurred_at": when},
            )
            assert bad.status_code == 400, bad.text
            assert _fields(bad) == ["occurred_at"]
        window = client.post(
            "/memory/episodic/summarize", json={"namespace": "chat", "session_id": session, "until": 1e308}
        )
        assert window.status_code == 400 and _fields(window) == ["until"], window.text
        summary = client.post("/memory/episodic/summarize", json={"namespace": "chat", "session_id": session})
    assert summary.status_code == 200, summary.text
    assert summary.json()["count"] == 1


@pytest.mark.parametrize(
    "embedding", [[1e300, 1.0], [1e-300, 1e-300], [1.0] * 8193], ids=["huge", "tiny", "too-many"]
)
def test_a_vector_no_store_holds_is_a_400_naming_embedding(memory: MemoryServer, embedding: list) -> None:
    with _memory(memory) as client:
        response = client.post(
            "/memory/semantic/records",
            json={"namespace": "vectors", "content": "x", "embedding": embedding, "embedding_model": "m"},
        )
    assert response.status_code == 400, response.text
    assert _fields(response) == ["embedding"]


def test_a_bad_record_an_older_version_stored_is_skipped_with_a_log_line(
    memory: MemoryServer, memory_dir: Path
) -> None:
    session = "old-session"
    with _memory(memory) as client:
        kept = client.post(
            "/memory/episodic/records",
            json={"namespace": "old", "content": "a record this version wrote", "session_id": session},
        )
        assert kept.status_code == 201, kept.text
        record = kept.json()["record"]
    # What an older version accepted and stored: occurred_at 1e308, written beside the good one.
    old = {**record, "id": "old-bad-1", "occurred_at": 1e308, "workspace_id": APP_ID}
    old.pop("score", None)
    database = memory_dir / "memory" / "memory.db"  # MEMORY_SQLITE_PATH as memory_env sets it
    with contextlib.closing(sqlite3.connect(database, timeout=10)) as db:
        db.execute(
            "INSERT INTO records (kind, workspace_id, org_id, user_id, namespace, id, session_id, sort_at, "
            "embedding_model, vector, record) VALUES ('episodic', ?, '', '', 'old', 'old-bad-1', ?, 1e308, "
            "NULL, NULL, ?)",
            (APP_ID, session, json.dumps(old)),
        )
        db.commit()
    with _memory(memory) as client:
        summary = client.post("/memory/episodic/summarize", json={"namespace": "old", "session_id": session})
        listed = client.post("/memory/episodic/list", json={"namespace": "old"})
        fetched = client.get("/memory/episodic/records/old-bad-1", params={"namespace": "old"})
    assert summary.status_code == 200, summary.text
    assert summary.json()["count"] == 1
    assert listed.status_code == 200, listed.text
    assert [item["id"] for item in listed.json()["results"]] == [record["id"]]
    assert fetched.status_code == 404, fetched.text
    deadline = time.monotonic() + 5
    while "old-bad-1 skipped" not in memory.process.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "memory record episodic/" in memory.process.output()
    assert "old-bad-1 skipped: it does not load (occurred_at)" in memory.process.output()


# The fuzz run: each server's request models, no 500 -----------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
_RAW = st.sampled_from(
    [
        b"",
        b"null",
        b"[]",
        b"{",
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b'{"a": 1e400}',
        b"[" * 200 + b"]" * 200,
        b'{"s": "\\ud800"}',
        b"\xff\xfe",
        b'"' + b"x" * 1000 + b'"',
    ]
)


def _body_of(
    model: type,
    *,
    required: dict[str, st.SearchStrategy[Any]] | None = None,
    without: tuple[str, ...] = (),
) -> st.SearchStrategy:
    """Objects with any of the model's fields (random JSON values), and raw bytes no parser expects."""
    skip = {*(required or {}), *without}
    optional = {name: _VALUES for name in model.model_fields if name not in skip}
    objects = st.fixed_dictionaries(required or {}, optional=optional).map(lambda d: json.dumps(d).encode())
    return objects | _RAW


FUZZ = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _fuzz(client: httpx.Client, routes: list[tuple[str, st.SearchStrategy[bytes]]]) -> None:
    for path, bodies in routes:
        _fuzz_route(client, path, bodies)()


def _fuzz_route(client: httpx.Client, path: str, bodies: st.SearchStrategy[bytes]) -> Callable[[], None]:
    @FUZZ
    @given(body=bodies)
    def run(body: bytes) -> None:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        assert response.status_code < 500, (path, body[:300], response.status_code, response.text[:300])

    return run


def test_fuzz_the_oe_client_and_runtime_apis_find_no_500(platform: Platform, execution_id: str) -> None:
    with platform.client() as client:
        _fuzz(
            client,
            [
                ("/invoke", _body_of(InvokeRequest)),
                (f"/api/v1/projects/{PROJECT}/executions/{execution_id}/resume", _body_of(ReviewDecision)),
                (f"/resume/{execution_id}", _body_of(WrappedResume)),
                (
                    f"/api/v1/projects/{PROJECT}/agents/{AGENT.split('/')[1]}/memory-export-token",
                    _body_of(MemoryExportRequest),
                ),
            ],
        )

        @FUZZ
        @given(
            query=st.dictionaries(
                st.sampled_from(["limit", "cursor", "status", "agent", "project", "after"]),
                st.text(max_size=30) | st.integers(min_value=-(2**70), max_value=2**70).map(str),
                max_size=4,
            )
        )
        def reads(query: dict[str, str]) -> None:
            for path in ("/executions", f"/api/v1/projects/{PROJECT}/reviews"):
                response = client.get(path, params=query)
                assert response.status_code < 500, (path, query, response.text[:300])
            if "after" in query:
                # A stream that stays open while nothing happens: only its status is the point here.
                events = f"/execution/{execution_id}/events"
                with client.stream("GET", events, params={"after": query["after"]}) as response:
                    assert response.status_code < 500, (query, response.status_code)

        reads()
    existing = st.just(execution_id)
    with _runtime(platform) as client:
        _fuzz(
            client,
            [
                ("/tool/execute", _body_of(ToolExecuteRequest)),
                ("/tool/result", _body_of(ToolResultRequest)),
                ("/executor/callback", _body_of(ExecutorCallback)),
                ("/tool/execute", _body_of(ToolExecuteRequest, required={"execution_id": existing})),
            ],
        )


def _as_the_oe(platform: Platform, audience: str) -> dict[str, str]:
    """What the OE presents to a runtime: its signed statement (the runtime token opens neither now)."""
    headers = getattr(platform, "runtime_headers", None)
    return headers(audience) if headers is not None else {"authorization": f"Bearer {RUNTIME_TOKEN}"}


def test_fuzz_the_tool_pod_and_the_aer_find_no_500(platform: Platform) -> None:
    headers = _as_the_oe(platform, "tool")
    with httpx.Client(base_url=f"http://127.0.0.1:{platform.tool_port}", headers=headers, timeout=30) as tool:
        _fuzz(
            tool,
            [
                ("/execute", _body_of(ToolPodExecuteRequest)),
                ("/invoke_llm", _body_of(InvokeLLMRequest)),
                ("/drain", _body_of(DrainRequest)),
                ("/interrupt/call", _body_of(InterruptCallRequest)),
            ],
        )
    headers = _as_the_oe(platform, "aer")
    with httpx.Client(base_url=f"http://127.0.0.1:{platform.aer_port}", headers=headers, timeout=30) as aer:
        _fuzz(
            aer,
            [
                # Never a valid execute body (no `execution_id`): a fuzzed run would call the OE for real.
                ("/execute", _body_of(AERExecuteRequest, without=("execution_id",))),
                ("/drain", _body_of(DrainRequest)),
                ("/interrupt/call", _body_of(InterruptCallRequest)),
            ],
        )


def test_fuzz_the_memory_server_finds_no_500(memory: MemoryServer) -> None:
    in_fuzz = {"namespace": st.just("fuzz")}
    with _memory(memory) as client:
        _fuzz(
            client,
            [
                ("/memory/semantic/records", _body_of(WriteBody, required={"namespace": st.just("fuzz")})),
                ("/memory/episodic/records", _body_of(WriteBody, required={"namespace": st.just("fuzz")})),
                ("/memory/semantic/search", _body_of(SearchBody, required={"namespace": st.just("fuzz")})),
                ("/memory/episodic/list", _body_of(ListBody, required={"namespace": st.just("fuzz")})),
                ("/memory/semantic/namespaces", _body_of(NamespacesBody)),
                ("/memory/episodic/summarize", _body_of(SummarizeBody, required=in_fuzz)),
                ("/memory/taxonomic/subtree", _body_of(SubtreeBody)),
            ],
        )
    assert "store_unavailable" not in memory.process.output()
