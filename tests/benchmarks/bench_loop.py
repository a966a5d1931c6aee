"""A governed agent turn: AER -> OE -> Tool Pod (tools and model calls) vs the same calls made directly.

Real processes on loopback: an LLM peer speaking the chat-completions wire format, a Tool Pod, an AER and
the OE (SQLite). Each execution makes 10 steps, 5 model calls and 5 tool calls, and times each one from
inside the agent's code. The baseline is the same calls made directly from this process (minimal keep-alive
HTTP callers to the peer and to the Tool Pod's `/execute`), in the same run. Then 50 executions at once in
one AER, against 50 direct callers at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.benchmarks.bench_oe import CLIENT_TOKEN, RUNTIME_TOKEN, Stack, _ms
from tests.benchmarks.bench_toolpod import _cpu_seconds, _percentile
from tests.conftest import REPO_ROOT, free_port, wait_for_port

AGENT = "bench/agent"
SEQUENTIAL_EXECUTIONS = 30
CONCURRENT_EXECUTIONS = 50
PAIRS = 5


async def _post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, path: str, body: dict[str, object]
) -> None:
    """One keep-alive HTTP/1.1 POST: the cheapest caller there is, so the baseline is the servers' time."""
    payload = json.dumps(body).encode()
    writer.write(
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {RUNTIME_TOKEN}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)
    if head[9:12] != b"200":
        raise RuntimeError(f"{path}: {head[:12]!r}")


async def _direct_steps(
    peer_port: int, tool_port: int, *, callers: int, rounds: int
) -> dict[str, list[float]]:
    """The same calls made directly, each caller on its own keep-alive connections."""
    timings: dict[str, list[float]] = {"llm": [], "tool": []}

    async def caller() -> None:
        peer = await asyncio.open_connection("127.0.0.1", peer_port)
        tool = await asyncio.open_connection("127.0.0.1", tool_port)
        try:
            for pair in range(PAIRS * rounds):
                started = time.perf_counter()
                message = {"role": "user", "content": f"step {pair}"}
                await _post(
                    *peer, path="/v1/chat/completions", body={"model": "bench", "messages": [message]}
                )
                timings["llm"].append(time.perf_counter() - started)
                started = time.perf_counter()
                await _post(
                    *tool, path="/execute", body={"tool": "noop", "arguments": {"item_id": str(pair)}}
                )
                timings["tool"].append(time.perf_counter() - started)
        finally:
            peer[1].close()
            tool[1].close()

    await asyncio.gather(*(caller() for _ in range(callers)))
    return timings


async def _platform_steps(
    oe_port: int, *, executions: int, at_once: bool
) -> tuple[dict[str, list[float]], float]:
    """Run `executions` executions (all at once, or one after another); the agent's own step timings."""
    timings: dict[str, list[float]] = {"llm": [], "tool": []}
    headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    # Each client waits on its execution's event stream, as the CLI's `--watch` does: polling 50
    # executions every 20 ms made the client's GETs a third of the OE's work, and httpx's default pool
    # (20 kept alive) reconnected for most of them.
    limits = httpx.Limits(max_connections=2 * executions, max_keepalive_connections=2 * executions)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{oe_port}", headers=headers, timeout=120, limits=limits
    ) as client:

        async def one() -> None:
            response = await client.post("/invoke", json={"agent": AGENT, "input": {"pairs": PAIRS}})
            execution_id = response.json()["execution_id"]
            async with client.stream("GET", f"/execution/{execution_id}/events") as events:
                async for line in events.aiter_lines():
                    if line.startswith("event: ") and line[7:] in ("completed", "failed", "cancelled"):
                        break
            view = (await client.get(f"/execution/{execution_id}")).json()
            if view["status"] != "completed":
                raise RuntimeError(f"execution failed: {view.get('error')}")
            for kind, seconds in view["result"]["timings"]:
                timings[kind].append(seconds)

        started = time.perf_counter()
        if at_once:
            await asyncio.gather(*(one() for _ in range(executions)))
        else:
            for _ in range(executions):
                await one()
        return timings, time.perf_counter() - started


def _report(label: str, platform: dict[str, list[float]], direct: dict[str, list[float]]) -> None:
    print(label)
    for kind in ("llm", "tool"):
        p, d = platform[kind], direct[kind]
        print(
            f"  {kind:4s} direct p50 {_ms(_percentile(d, 0.5))} p99 {_ms(_percentile(d, 0.99))} | "
            f"governed p50 {_ms(_percentile(p, 0.5))} p99 {_ms(_percentile(p, 0.99))} | "
            f"added p50 {_ms(_percentile(p, 0.5) - _percentile(d, 0.5))} "
            f"p99 {_ms(_percentile(p, 0.99) - _percentile(d, 0.99))}"
        )
    both_p = platform["llm"] + platform["tool"]
    both_d = direct["llm"] + direct["tool"]
    print(
        f"  per step, all kinds: added p50 {_ms(_percentile(both_p, 0.5) - _percentile(both_d, 0.5))}"
        f"  p99 {_ms(_percentile(both_p, 0.99) - _percentile(both_d, 0.99))}"
    )


def main() -> None:
    print("load average before: {:.2f} {:.2f} {:.2f} (2 cores shared)".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
        peer_port = free_port()
        peer = subprocess.Popen(
            [sys.executable, "-m", "tests.providers.llm_peer", "--port", str(peer_port)],
            cwd=REPO_ROOT,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO_ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        stack = Stack(Path(tmp))
        try:
            wait_for_port("127.0.0.1", peer_port, proc=peer)
            peer_url = f"http://127.0.0.1:{peer_port}/v1"
            llm_env = {"AGENTIC_LLM_BASE_URL": peer_url, "AGENTIC_LLM_MODEL": "bench"}
            stack.start_runtimes(tenant="tests.benchmarks.loop_tenant:app", extra=llm_env)
            oe, oe_port = stack.start_oe({"OE_SQLITE_PATH": str(Path(tmp) / "oe.sqlite3")})
            asyncio.run(_platform_steps(oe_port, executions=3, at_once=False))  # warm-up
            direct = asyncio.run(
                _direct_steps(peer_port, stack.tool_port, callers=1, rounds=SEQUENTIAL_EXECUTIONS)
            )
            governed, _ = asyncio.run(
                _platform_steps(oe_port, executions=SEQUENTIAL_EXECUTIONS, at_once=False)
            )
            _report(
                f"{SEQUENTIAL_EXECUTIONS} executions one after another, {2 * PAIRS} steps each:",
                governed,
                direct,
            )
            print("  target: added < 3 ms per step at p50 (AER and OE together)")
            direct = asyncio.run(
                _direct_steps(peer_port, stack.tool_port, callers=CONCURRENT_EXECUTIONS, rounds=1)
            )
            pids = {
                "tool pod": stack.processes[0].pid,
                "aer": stack.processes[1].pid,
                "oe": oe.pid,
                "peer": peer.pid,
            }
            cpu_before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
            governed, wall = asyncio.run(
                _platform_steps(oe_port, executions=CONCURRENT_EXECUTIONS, at_once=True)
            )
            cpu = {name: _cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
            _report(f"{CONCURRENT_EXECUTIONS} executions in flight at once in one AER:", governed, direct)
            steps = CONCURRENT_EXECUTIONS * 2 * PAIRS
            print(f"  {steps} steps in {wall:.2f} s ({steps / wall:.0f} steps/s); target: p99 added < 50 ms")
            print(
                "  CPU per step: "
                + ", ".join(f"{name} {_ms(seconds / steps)}" for name, seconds in cpu.items())
            )
            stack.stop(oe)
        finally:
            stack.stop()
            peer.terminate()
            peer.wait(timeout=10)
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
