import asyncio
import json
from typing import Any

from agent_runtime.sdk import App
from agent_runtime.servers.metrics import ToolMetrics
from agent_runtime.servers.tool import MAX_EXECUTE_BODY_BYTES, ExecuteEndpoint
from agent_runtime.servers.tool_calls import ToolCallService


def _endpoint() -> tuple[ExecuteEndpoint, list[str]]:
    app = App()

    @app.tool
    async def echo(text: str) -> str:
        """Echo."""
        return text

    passed: list[str] = []

    async def fallback(scope: dict[str, Any], receive: Any, send: Any) -> None:
        passed.append(scope["path"])

    service = ToolCallService(
        connectors=[],
        tenant_tools=list(app.tools.values()),
        secret_env={},
        metrics=ToolMetrics(component="tool"),
    )
    return ExecuteEndpoint(fallback, service=service), passed


def _call(endpoint: ExecuteEndpoint, *, method: str, path: str, chunks: list[bytes]) -> tuple[int, Any]:
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(endpoint({"type": "http", "method": method, "path": path}, receive, send))
    if not sent:
        return 0, None
    return sent[0]["status"], json.loads(sent[1]["body"])


def test_execute_fast_path() -> None:
    endpoint, passed = _endpoint()
    body = json.dumps({"tool": "echo", "arguments": {"text": "hi"}}).encode()
    status, answer = _call(endpoint, method="POST", path="/execute", chunks=[body[:5], body[5:]])
    assert (status, answer["status"], answer["result"]) == (200, "success", "hi")
    assert _call(endpoint, method="GET", path="/execute", chunks=[b""])[0] == 405
    assert _call(endpoint, method="POST", path="/execute", chunks=[b"{"])[0] == 422
    too_big = [b"x" * (MAX_EXECUTE_BODY_BYTES // 2)] * 3
    status, answer = _call(endpoint, method="POST", path="/execute", chunks=too_big)
    assert status == 413 and answer["detail"][0]["field"] == "(body)"
    assert _call(endpoint, method="GET", path="/tools", chunks=[b""]) == (0, None)
    assert passed == ["/tools"]
