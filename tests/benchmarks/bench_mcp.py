"""An MCP `tools/call` through the Tool Pod vs the same call made directly with the official `mcp` client.

One real MCP server (the official SDK, `tests/providers/mcp_server.py`, JSON answers, a bearer token) on
loopback. Two paths to its read-only `lookup` tool, measured in the same run:
- direct:   the official client (`streamable_http_client` + `ClientSession`, one session) in its own venv;
- tool pod: a caller -> Tool Pod /execute (auth, routing, metrics) -> our MCP client -> the same server.
Prints p50/p99 with one caller (the added latency is the Tool Pod path's p50 minus the direct one's, each
the median of two rounds taken in turns), then calls/s with 32 concurrent callers on each path.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from agent_runtime.connectors import build_bundle, write_bundle
from agent_runtime.connectors.mcp.catalog import materialize_mcp, usable
from agent_runtime.connectors.mcp.client import McpClient
from tests.benchmarks.bench_toolpod import (
    CONCURRENT_CALLERS,
    CONCURRENT_SECONDS,
    Target,
    _percentile,
    _raw_callers,
    _run,
    _sequential,
    _stop,
)
from tests.conftest import REPO_ROOT, free_port, wait_for_port
from tests.providers.mcp_peer import MCP_TOKEN, mcp_python, mcp_server

CALLS = 600
WARMUP = 100
TOKEN = "bench-runtime-token"
ID8 = "be0c4e11"

_OFFICIAL = """
import asyncio, json, sys, time
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

url, token, calls, warmup, callers, seconds = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:7])

async def main():
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx2.Limits(max_connections=int(callers) + 4, max_keepalive_connections=int(callers) + 4)
    async with httpx2.AsyncClient(headers=headers, timeout=30, limits=limits) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                async def one():
                    result = await session.call_tool("lookup", {"id": "42"})
                    assert not result.is_error, result
                for _ in range(int(warmup)):
                    await one()
                latencies = []
                for _ in range(int(calls)):
                    started = time.perf_counter()
                    await one()
                    latencies.append(time.perf_counter() - started)
                done = 0
                deadline = time.perf_counter() + seconds
                async def caller():
                    nonlocal done
                    while time.perf_counter() < deadline:
                        await one()
                        done += 1
                started = time.perf_counter()
                await asyncio.gather(*(caller() for _ in range(int(callers))))
                rate = done / (time.perf_counter() - started)
    print(json.dumps({"latencies": latencies, "rate": rate}))

asyncio.run(main())
"""


def _official(url: str, *, calls: int, callers: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-mcp-official-") as scratch:
        script = Path(scratch) / "official_client.py"
        script.write_text(_OFFICIAL)
        argv = [
            str(mcp_python()),
            str(script),
            url,
            MCP_TOKEN,
            str(calls),
            str(WARMUP),
            str(callers),
            str(seconds),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the official client failed: {done.stderr.strip()[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _bundle(directory: Path, url: str) -> Path:
    async def discover() -> Any:
        client = McpClient(url)
        try:
            return await client.list_tools(token=MCP_TOKEN)
        finally:
            await client.aclose()

    found = asyncio.run(discover())
    kept, _ = usable(found.tools, id8=ID8)
    defs = materialize_mcp(
        name="crm", id8=ID8, config={"url": url}, credentials={"token": "CRM_MCP_TOKEN"}, tools=kept
    )
    return write_bundle(build_bundle([], [defs]), directory)


async def _toolpod_latencies(target: Target) -> list[float]:
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        import tests.benchmarks.bench_toolpod as toolpod

        saved = toolpod.SEQUENTIAL_CALLS, toolpod.WARMUP_CALLS
        toolpod.SEQUENTIAL_CALLS, toolpod.WARMUP_CALLS = CALLS, WARMUP
        try:
            return (await _sequential(client, [target]))[target.name]
        finally:
            toolpod.SEQUENTIAL_CALLS, toolpod.WARMUP_CALLS = saved


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.3f} ms"


def main() -> None:
    print("load average before: {:.2f} {:.2f} {:.2f} (2 cores shared)".format(*os.getloadavg()))
    with (
        mcp_server(mode="json", page_size=50) as peer,
        tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp,
    ):
        index = _bundle(Path(tmp) / "bundle", peer.url)
        port = free_port()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "PYTHONPATH": str(REPO_ROOT),
            "RUNNER_MODE": "tool",
            "APP_HOST": "127.0.0.1",
            "RUNTIME_PORT": str(port),
            "RUNTIME_TOKEN": TOKEN,
            "STRUCTURED_LOGGING": "true",
            "AGENTIC_CONNECTOR_BUNDLE_PATH": str(index),
            "CRM_MCP_TOKEN": MCP_TOKEN,
        }
        toolpod = subprocess.Popen(
            [sys.executable, "-m", "agent_runtime.launcher"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port("127.0.0.1", port, proc=toolpod)
            # No execution or step: the Tool Pod's memory of recent calls would answer a repeated one.
            body = json.dumps({"tool": f"mcp.{ID8}.lookup", "arguments": {"id": "42"}}).encode()
            auth = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
            target = Target("tool pod", port, "POST", "/execute", auth, body, b'"status":"success"')
            direct_p50: list[float] = []
            pod_p50: list[float] = []
            direct_all: list[float] = []
            pod_all: list[float] = []
            for _ in range(2):  # in turns, so a shift in background load hits both paths alike
                direct = _official(peer.url, calls=CALLS, callers=1, seconds=0.01)["latencies"]
                pod = asyncio.run(_toolpod_latencies(target))
                direct_p50.append(_percentile(direct, 0.5))
                pod_p50.append(_percentile(pod, 0.5))
                direct_all += direct
                pod_all += pod
            direct_rate = _official(
                peer.url, calls=0, callers=CONCURRENT_CALLERS, seconds=CONCURRENT_SECONDS
            )["rate"]
            pod_rate: float = 0.0

            async def rate() -> None:
                nonlocal pod_rate
                pod_rate, _ = await _raw_callers(target)

            _run(rate())
        finally:
            _stop([toolpod])
    print(f"one caller, {CALLS} calls per round (+{WARMUP} warm-up), two rounds per path in turns:")
    for name, samples in (("direct (official client)", direct_all), ("through the Tool Pod", pod_all)):
        print(f"  {name:26s} p50 {_ms(_percentile(samples, 0.5))}  p99 {_ms(_percentile(samples, 0.99))}")
    added = statistics.median(pod_p50) - statistics.median(direct_p50)
    rounds = f"direct {', '.join(_ms(v).strip() for v in direct_p50)}; tool pod "
    rounds += ", ".join(_ms(v).strip() for v in pod_p50)
    print(f"  added by the Tool Pod: p50 {_ms(added)} (round p50s: {rounds})")
    print(f"{CONCURRENT_CALLERS} concurrent callers, {CONCURRENT_SECONDS:g} s per path:")
    print(f"  direct (official client, one session)     {direct_rate:7.0f} calls/s")
    ratio = pod_rate / direct_rate
    print(f"  through the Tool Pod (keep-alive callers) {pod_rate:7.0f} calls/s ({ratio:.2f}x direct)")


if __name__ == "__main__":
    main()
