"""Tool Pod `/execute` through a real uvicorn subprocess vs calling the loopback provider directly.

Both paths use the same httpx client in this process, so the difference is what the Tool Pod adds:
auth check, request validation, the connector executor's outbound call, classification, metrics.
Prints added latency (p50, p99) with one caller, and calls/s with 32 concurrent callers.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from agent_runtime.connectors import (
    build_bundle,
    compile_catalog,
    materialize_connector,
    scaffold_tool_yaml,
    write_bundle,
)
from tests.conftest import REPO_ROOT, free_port, wait_for_port

SEQUENTIAL_CALLS = 2000
CONCURRENT_CALLERS = 32
CONCURRENT_SECONDS = 5.0
WARMUP_CALLS = 300
TOKEN = "bench-runtime-token"
PROVIDER_CREDENTIAL = "bench-provider-credential"

DOCUMENT = {
    "openapi": "3.0.3",
    "info": {"title": "Echo provider", "version": "1"},
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/echo/items/{itemId}": {
            "get": {
                "operationId": "getItem",
                "parameters": [
                    {"name": "itemId", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "the item"}},
            }
        }
    },
}

Call = Callable[[httpx.AsyncClient], Awaitable[None]]


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _sequential(call: Call, client: httpx.AsyncClient, count: int) -> list[float]:
    for _ in range(WARMUP_CALLS):
        await call(client)
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        await call(client)
        latencies.append(time.perf_counter() - started)
    return latencies


async def _concurrent(call: Call, client: httpx.AsyncClient) -> tuple[float, list[float]]:
    """Calls per second and latencies with CONCURRENT_CALLERS callers for CONCURRENT_SECONDS."""
    latencies: list[float] = []
    deadline = time.perf_counter() + CONCURRENT_SECONDS

    async def caller() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await call(client)
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(call(client) for _ in range(CONCURRENT_CALLERS)))  # open the connections
    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(CONCURRENT_CALLERS)))
    return len(latencies) / (time.perf_counter() - started), latencies


async def _measure(provider_url: str, toolpod_url: str) -> None:
    async def direct(client: httpx.AsyncClient) -> None:
        response = await client.get(
            f"{provider_url}/echo/items/42", headers={"authorization": f"Bearer {PROVIDER_CREDENTIAL}"}
        )
        response.raise_for_status()

    async def via_toolpod(client: httpx.AsyncClient) -> None:
        response = await client.post(
            f"{toolpod_url}/execute",
            json={"tool": "echo_getItem", "arguments": {"itemId": "42"}, "execution_id": "bench", "step": 1},
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        if response.status_code != 200 or response.json()["status"] != "success":
            raise RuntimeError(f"tool pod call failed: {response.status_code} {response.text[:300]}")

    limits = httpx.Limits(max_connections=CONCURRENT_CALLERS, max_keepalive_connections=CONCURRENT_CALLERS)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        base = await _sequential(direct, client, SEQUENTIAL_CALLS)
        pod = await _sequential(via_toolpod, client, SEQUENTIAL_CALLS)
        base_rate, base_loaded = await _concurrent(direct, client)
        pod_rate, pod_loaded = await _concurrent(via_toolpod, client)

    def ms(value: float) -> str:
        return f"{value * 1000:.3f} ms"

    print(f"one caller, {SEQUENTIAL_CALLS} calls each:")
    for name, samples in (("direct to provider", base), ("via Tool Pod", pod)):
        print(
            f"  {name:20s} p50 {ms(_percentile(samples, 0.5))}  p99 {ms(_percentile(samples, 0.99))}"
            f"  mean {ms(statistics.fmean(samples))}"
        )
    added_p50 = _percentile(pod, 0.5) - _percentile(base, 0.5)
    added_p99 = _percentile(pod, 0.99) - _percentile(base, 0.99)
    print(f"  added by the Tool Pod: p50 {ms(added_p50)}  p99 {ms(added_p99)}  (target p50 < 1 ms)")
    print(f"{CONCURRENT_CALLERS} concurrent callers, {CONCURRENT_SECONDS:g} s each:")
    for name, rate, samples in (
        ("direct to provider", base_rate, base_loaded),
        ("via Tool Pod", pod_rate, pod_loaded),
    ):
        print(
            f"  {name:20s} {rate:8.0f} calls/s  p50 {ms(_percentile(samples, 0.5))}"
            f"  p99 {ms(_percentile(samples, 0.99))}"
        )
    print(
        f"  Tool Pod throughput: {pod_rate:.0f} calls/s = {pod_rate / base_rate:.2f}x direct (target >= 1500)"
    )


def _write_bundle(directory: Path, provider_url: str) -> Path:
    catalog = compile_catalog(DOCUMENT, connector_name="echo")
    tool = scaffold_tool_yaml(catalog, base_url=provider_url)
    return write_bundle(build_bundle([materialize_connector(tool, catalog)]), directory)


def _run_event_loop(coroutine: Awaitable[None]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop ships with the runtime extra
        asyncio.run(coroutine)  # type: ignore[arg-type]
        return
    uvloop.run(coroutine)  # type: ignore[arg-type]


def main() -> None:
    import subprocess

    provider_port, toolpod_port = free_port(), free_port()
    provider_url = f"http://127.0.0.1:{provider_port}"
    with tempfile.TemporaryDirectory(prefix="bench-toolpod-") as tmp:
        index = _write_bundle(Path(tmp) / "bundle", provider_url)
        base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp}
        provider = subprocess.Popen(
            [sys.executable, "-m", "tests.providers.echo_provider", "--port", str(provider_port)],
            cwd=REPO_ROOT,
            env={**base_env, "PYTHONPATH": str(REPO_ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        toolpod_env = {
            **base_env,
            "RUNNER_MODE": "tool",
            "APP_HOST": "127.0.0.1",
            "RUNTIME_PORT": str(toolpod_port),
            "RUNTIME_TOKEN": TOKEN,
            "STRUCTURED_LOGGING": "true",
            "AGENTIC_CONNECTOR_BUNDLE_PATH": str(index),
            "ECHO_TOKEN": PROVIDER_CREDENTIAL,
        }
        log = Path(tmp) / "toolpod.log"
        with log.open("wb") as sink:
            toolpod = subprocess.Popen(
                [sys.executable, "-m", "agent_runtime.launcher"], env=toolpod_env, stdout=sink, stderr=sink
            )
        try:
            wait_for_port("127.0.0.1", provider_port, proc=provider)
            wait_for_port("127.0.0.1", toolpod_port, proc=toolpod)
            _run_event_loop(_measure(provider_url, f"http://127.0.0.1:{toolpod_port}"))
        finally:
            for proc in (toolpod, provider):
                proc.terminate()
            for proc in (toolpod, provider):
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        print(f"Tool Pod exit code after SIGTERM: {toolpod.returncode}")


if __name__ == "__main__":
    main()
