"""Tool Pod `/execute` through a real uvicorn subprocess vs calling the loopback provider directly.

Three paths, each a real HTTP call on loopback:
- direct:    the caller -> the echo provider (the baseline, measured in the same run);
- connector: the caller -> Tool Pod /execute -> connector executor -> the same provider;
- tenant:    the caller -> Tool Pod /execute -> an async tenant tool that does no I/O: the Tool Pod's own
             path (auth, validation, routing, metrics, response) without an outbound call.
Prints added latency (p50, p99) with one httpx caller, then calls/s with 32 concurrent callers, once with
httpx as the caller and once with a minimal keep-alive HTTP/1.1 caller (so the caller's own cost does not
cap the figure), with the Tool Pod's CPU time per call read from /proc.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
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
from tests.providers.echo_provider import item_api_document

SEQUENTIAL_CALLS = 1500
WARMUP_CALLS = 200
CONCURRENT_CALLERS = 32
CONCURRENT_SECONDS = 4.0
TOKEN = "bench-runtime-token"
PROVIDER_CREDENTIAL = "bench-provider-credential"


@dataclass(frozen=True)
class Target:
    """One HTTP request to repeat: method, path, headers and body, and how to tell it succeeded."""

    name: str
    port: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""
    success_marker: bytes = b""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def raw_request(self) -> bytes:
        lines = [f"{self.method} {self.path} HTTP/1.1", f"host: 127.0.0.1:{self.port}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        lines.append(f"content-length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + self.body


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.3f} ms"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _httpx_call(client: httpx.AsyncClient, target: Target) -> None:
    response = await client.request(target.method, target.url, headers=target.headers, content=target.body)
    if response.status_code != 200 or target.success_marker not in response.content:
        raise RuntimeError(f"{target.name}: {response.status_code} {response.text[:300]}")


async def _sequential(client: httpx.AsyncClient, targets: list[Target]) -> dict[str, list[float]]:
    """One caller; the paths take turns call by call, so background load shifts hit them all alike."""
    for _ in range(WARMUP_CALLS):
        for target in targets:
            await _httpx_call(client, target)
    latencies: dict[str, list[float]] = {target.name: [] for target in targets}
    for _ in range(SEQUENTIAL_CALLS):
        for target in targets:
            started = time.perf_counter()
            await _httpx_call(client, target)
            latencies[target.name].append(time.perf_counter() - started)
    return latencies


async def _httpx_callers(client: httpx.AsyncClient, target: Target) -> float:
    """Calls per second with CONCURRENT_CALLERS httpx callers sharing one client."""
    done = 0
    deadline = time.perf_counter() + CONCURRENT_SECONDS

    async def caller() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await _httpx_call(client, target)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(CONCURRENT_CALLERS)))
    return done / (time.perf_counter() - started)


async def _raw_callers(target: Target) -> tuple[float, int]:
    """Calls per second with CONCURRENT_CALLERS minimal keep-alive HTTP/1.1 callers, one connection each."""
    request = target.raw_request()
    done = 0
    deadline = time.perf_counter() + CONCURRENT_SECONDS

    async def caller() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
        try:
            while time.perf_counter() < deadline:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = head[9:12]
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body = await reader.readexactly(length)
                if status != b"200" or target.success_marker not in body:
                    raise RuntimeError(f"{target.name}: {head[:12]!r} {body[:300]!r}")
                done += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(CONCURRENT_CALLERS)))
    elapsed = time.perf_counter() - started
    return done / elapsed, done


async def _measure(*, direct: Target, connector: Target, tenant: Target, toolpod_pid: int) -> None:
    limits = httpx.Limits(max_connections=CONCURRENT_CALLERS, max_keepalive_connections=CONCURRENT_CALLERS)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        latencies = await _sequential(client, [direct, connector, tenant])
        httpx_rates = {target.name: await _httpx_callers(client, target) for target in (direct, connector)}
    raw_rates: dict[str, float] = {}
    cpu_per_call: dict[str, float] = {}
    for target in (direct, connector, tenant):
        cpu_before = _cpu_seconds(toolpod_pid)
        raw_rates[target.name], calls = await _raw_callers(target)
        cpu_per_call[target.name] = (_cpu_seconds(toolpod_pid) - cpu_before) / calls

    base = latencies[direct.name]
    print(f"one httpx caller, paths interleaved, {SEQUENTIAL_CALLS} calls each (+{WARMUP_CALLS} warm-up):")
    for name, samples in latencies.items():
        print(f"  {name:10s} p50 {_ms(_percentile(samples, 0.5))}  p99 {_ms(_percentile(samples, 0.99))}")
    for name in (connector.name, tenant.name):
        added_p50 = _percentile(latencies[name], 0.5) - _percentile(base, 0.5)
        added_p99 = _percentile(latencies[name], 0.99) - _percentile(base, 0.99)
        print(f"  added by the Tool Pod ({name}): p50 {_ms(added_p50)}  p99 {_ms(added_p99)}")

    print("  target: added p50 < 1 ms")
    print(
        f"{CONCURRENT_CALLERS} concurrent httpx callers, one AsyncClient, {CONCURRENT_SECONDS:g} s per path:"
    )
    for name, rate in httpx_rates.items():
        print(f"  {name:10s} {rate:7.0f} calls/s  ({rate / httpx_rates[direct.name]:.2f}x direct)")
    print(f"{CONCURRENT_CALLERS} concurrent minimal keep-alive callers, {CONCURRENT_SECONDS:g} s per path:")
    for name, rate in raw_rates.items():
        cpu = ""
        if name != direct.name:
            # What one dedicated core could sustain at this CPU cost: steadier than calls/s on a shared host.
            per_core = 1 / cpu_per_call[name]
            cpu = f"  Tool Pod CPU {_ms(cpu_per_call[name])}/call (= {per_core:.0f} calls/s per core)"
        print(f"  {name:10s} {rate:7.0f} calls/s  ({rate / raw_rates[direct.name]:.2f}x direct){cpu}")
    print(f"  target: >= 1500 calls/s through the Tool Pod (connector path: {raw_rates[connector.name]:.0f})")


def _write_bundle(directory: Path, provider_url: str) -> Path:
    catalog = compile_catalog(item_api_document(), connector_name="echo")
    tool = scaffold_tool_yaml(catalog, base_url=provider_url)
    return write_bundle(build_bundle([materialize_connector(tool, catalog)]), directory)


def _run(coroutine: Awaitable[None]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop ships with the runtime extra
        asyncio.run(coroutine)  # type: ignore[arg-type]
        return
    uvloop.run(coroutine)  # type: ignore[arg-type]


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for proc in processes:
        proc.terminate()
    for proc in processes:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    print("load average before: {:.2f} {:.2f} {:.2f} (2 cores shared)".format(*os.getloadavg()))
    provider_port, toolpod_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="bench-toolpod-") as tmp:
        index = _write_bundle(Path(tmp) / "bundle", f"http://127.0.0.1:{provider_port}")
        base_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "PYTHONPATH": str(REPO_ROOT),
        }
        started: list[subprocess.Popen[bytes]] = []
        try:
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tests.providers.echo_provider", "--port", str(provider_port)],
                    cwd=REPO_ROOT,
                    env=base_env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            toolpod_env = {
                **base_env,
                "RUNNER_MODE": "tool",
                "APP_HOST": "127.0.0.1",
                "RUNTIME_PORT": str(toolpod_port),
                "RUNTIME_TOKEN": TOKEN,
                "STRUCTURED_LOGGING": "true",
                "AGENTIC_CONNECTOR_BUNDLE_PATH": str(index),
                "AGENT_ENTRYPOINT": "tests.benchmarks.toolpod_tenant:app",
                "ECHO_TOKEN": PROVIDER_CREDENTIAL,
            }
            toolpod = subprocess.Popen(
                [sys.executable, "-m", "agent_runtime.launcher"],
                cwd=REPO_ROOT,
                env=toolpod_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            started.append(toolpod)
            wait_for_port("127.0.0.1", provider_port, proc=started[0])
            wait_for_port("127.0.0.1", toolpod_port, proc=toolpod)
            auth = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}

            def execute(name: str, tool: str, arguments: dict[str, str]) -> Target:
                # No execution or step: a repeated (execution, step) is answered from the Tool Pod's memory
                # of recent calls, which would time that instead of the call (bench_oe times the OE's path).
                body = json.dumps({"tool": tool, "arguments": arguments})
                return Target(
                    name, toolpod_port, "POST", "/execute", auth, body.encode(), b'"status":"success"'
                )

            _run(
                _measure(
                    direct=Target(
                        "direct",
                        provider_port,
                        "GET",
                        "/echo/items/42",
                        {"authorization": f"Bearer {PROVIDER_CREDENTIAL}"},
                        success_marker=b'"method"',
                    ),
                    connector=execute("connector", "echo_getItem", {"itemId": "42"}),
                    tenant=execute("tenant", "noop", {"item_id": "42"}),
                    toolpod_pid=toolpod.pid,
                )
            )
        finally:
            _stop(started)
        print(f"Tool Pod exit code after SIGTERM: {started[-1].returncode}")
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
