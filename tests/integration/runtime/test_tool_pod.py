"""The launcher in tool mode: a real subprocess with the operator's env and files, a real provider."""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import Process
from tests.integration.runtime.launched import (
    CONNECTOR_SECRET,
    SIGNING_KEY,
    Component,
    launch,
    new_port,
    operator_env,
    write_provider_bundle,
)
from tests.providers.echo_provider import RunningProvider


@pytest.fixture
def tool_pod(spawn: Callable[..., Process], tmp_path: Path, provider: RunningProvider) -> Component:
    index = write_provider_bundle(tmp_path / "bundle", base_url=provider.url)
    return launch(spawn, operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=index))


def _json_lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def test_tool_pod_executes_connector_and_tenant_tools(tool_pod: Component) -> None:
    with tool_pod.client(timeout=10) as client:
        ok = client.post(
            "/execute",
            json={
                "tool": "echo_getItem",
                "arguments": {"itemId": "42", "q": "x"},
                "execution_id": "ex-1",
                "step": 1,
            },
        ).json()
        assert ok["status"] == "success" and ok["error"] is None and ok["duration_ms"] > 0
        echoed = ok["result"]["body"]
        assert ok["result"]["status_code"] == 200
        assert (echoed["path"], echoed["query"]) == ("/echo/items/42", "q=x")
        # The credential comes from the Tool Pod's own environment, never from the caller, and the provider's
        # echo of it leaves the pod redacted (issue 27).
        assert echoed["headers"]["authorization"] == "Bearer [REDACTED]"
        assert CONNECTOR_SECRET not in json.dumps(ok)

        signed = client.post("/execute", json={"tool": "sign_message", "arguments": {"message": "hi"}}).json()
        expected = hmac.new(SIGNING_KEY.encode(), b"hi", hashlib.sha256).hexdigest()
        assert signed == {**signed, "status": "success", "result": {"signature": expected}}

        tools = {tool["name"] for tool in client.get("/tools").json()["tools"]}
        assert tools == {"echo_getItem", "echo_stall", "echo_leak", "sign_message"}  # no local tools here


def test_errors_carry_category_and_safe_explanation_only(tool_pod: Component) -> None:
    with tool_pod.client(timeout=10) as client:

        def call(tool: str, arguments: dict[str, object]) -> dict[str, object]:
            body = {"tool": tool, "arguments": arguments, "execution_id": "ex-err", "step": 7}
            response = client.post("/execute", json=body)
            assert response.status_code == 200
            return response.json()

        leaked = call("echo_leak", {"code": 401})
        assert leaked["status"] == "error" and leaked["result"] is None
        assert leaked["error"]["category"] == "auth" and leaked["error"]["status_code"] == 401
        # The provider's error body quotes the credential; what leaves the pod is the core's redacted excerpt.
        assert CONNECTOR_SECRET not in json.dumps(leaked)
        assert set(leaked["error"]) == {"category", "explanation", "status_code"}
        assert call("echo_leak", {"code": 404})["error"]["category"] == "not_found"
        assert call("echo_leak", {"code": 500})["error"]["category"] == "server_error"
        assert call("no_such_tool", {})["error"]["category"] == "unknown_tool"
        assert (
            call("word_count", {"text": "a"})["error"]["category"] == "unknown_tool"
        )  # local: runs in the AER
        missing = call("echo_getItem", {})["error"]
        assert missing["category"] == "invalid_arguments" and "itemId" in missing["explanation"]
        bad_tenant = call("sign_message", {"message": 3, "extra": 1})["error"]
        assert bad_tenant["category"] == "invalid_arguments"
        assert "message" in bad_tenant["explanation"] and "extra" in bad_tenant["explanation"]

        assert client.get("/execute").status_code == 405
        malformed = client.post("/execute", json={"arguments": {}})
        assert malformed.status_code == 422
        assert malformed.json() == {"detail": [{"field": "tool", "problem": "Field required"}]}

        metrics = client.get("/metrics").text
    assert (
        'agent_runtime_tool_call_errors_total{category="auth",component="tool",tool="echo_leak"} 1.0'
        in metrics
    )
    assert 'agent_runtime_tool_calls_in_flight{component="tool"} 0.0' in metrics

    tool_pod.process.stop()
    output = tool_pod.process.output()
    assert CONNECTOR_SECRET not in output and SIGNING_KEY not in output
    records = _json_lines(output)  # every line is one JSON record
    failures = [r for r in records if r["message"] == "tool echo_leak failed: auth"]
    assert failures and failures[0]["execution_id"] == "ex-err" and failures[0]["step"] == 7
    assert [r["message"] for r in records].count("listener bind resolved: host=127.0.0.1") == 1


def test_bearer_token_on_every_route_but_probes_and_metrics(tool_pod: Component) -> None:
    base = tool_pod.url
    assert httpx.get(f"{base}/healthz").status_code == 200
    assert httpx.get(f"{base}/readyz").json() == {"status": "ready"}
    assert httpx.get(f"{base}/metrics").status_code == 200
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Basic {tool_pod.token}"}):
        for method, path in (("POST", "/execute"), ("GET", "/tools"), ("GET", "/nowhere")):
            response = httpx.request(method, f"{base}{path}", headers=headers, json={"tool": "echo_getItem"})
            assert (response.status_code, response.content) == (401, b"")


def test_sigterm_drains_calls_in_flight_and_exits_zero(tool_pod: Component) -> None:
    calls = 12
    all_in_flight = f'agent_runtime_tool_calls_in_flight{{component="tool"}} {calls}.0'
    # One thread-safe client with a connection per call, created before the calls start.
    limits = httpx.Limits(max_connections=calls + 1)
    with tool_pod.client(timeout=30, limits=limits) as client:

        def slow_call(index: int) -> dict[str, object]:
            body = {
                "tool": "echo_stall",
                "arguments": {"delay": 3},
                "execution_id": f"drain-{index}",
                "step": 0,
            }
            return client.post("/execute", json=body).json()

        with ThreadPoolExecutor(max_workers=calls) as pool:
            futures = [pool.submit(slow_call, i) for i in range(calls)]
            deadline = time.monotonic() + 20
            while all_in_flight not in client.get("/metrics").text:
                if time.monotonic() > deadline or any(f.done() for f in futures):
                    pytest.fail("the calls were never all in flight at once")
                time.sleep(0.02)
            tool_pod.process.popen.send_signal(signal.SIGTERM)
            results = [future.result(timeout=30) for future in futures]
    assert [r["status"] for r in results] == ["success"] * calls
    assert all(r["result"]["body"] == {"stalled": True} for r in results)
    assert tool_pod.process.popen.wait(timeout=30) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{tool_pod.url}/healthz")
