"""Drain and interrupt/call on a real Tool Pod (uvicorn subprocess), each against a same-run baseline.

- drain: time from `POST /drain` to the first `200 completed` (the same request polled as fast as one caller
  can) with 100 calls of cooperative async tools in flight on one Tool Pod, and until all 100 calls have
  answered; baseline: the same drain of an execution served here with nothing in flight (one round trip).
- interrupt: time `POST /interrupt/call` takes to answer `interrupted` for one call among 100 in flight,
  and until that call's own answer (`interrupted`) reaches its caller; baselines: the same route answering
  `not_found` on the same execution (nothing to cancel), and a plain `/execute` of a tool that returns.

Figures are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import aiohttp

from agent_runtime.connectors import build_bundle, write_bundle
from tests.conftest import REPO_ROOT, free_port, wait_for_port

IN_FLIGHT = 100
ROUNDS = 15
SETTLE_S = 0.1
TOKEN = "bench-drain-token"
APP_ID = "bench.drain"
_IN_FLIGHT_METRIC = re.compile(rb'^agent_runtime_tool_calls_in_flight\{component="tool"\} (\S+)$', re.M)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def _p(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _summary(name: str, samples: list[float], base: list[float] | None = None) -> str:
    line = f"  {name:44s} p50 {_ms(_p(samples, 0.5))}  max {_ms(max(samples))}"
    if base is not None:
        line += f"  ({_p(samples, 0.5) / _p(base, 0.5):.1f}x baseline p50)"
    return line


class Pod:
    """One Tool Pod and one aiohttp client (the OE's) with a connection for every call in flight."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=IN_FLIGHT + 16),
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=aiohttp.ClientTimeout(total=120),
        )

    async def execute(self, tool: str, execution_id: str, step: int) -> dict[str, Any]:
        body = {"tool": tool, "arguments": {"tag": f"{step}"}, "execution_id": execution_id, "step": step}
        status, answer = await self.post("/execute", body)
        if status != 200:
            raise RuntimeError(f"/execute answered {status}: {answer}")
        return answer

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        async with self.client.post(self.url + path, json=body) as response:
            return response.status, dict(await response.json())

    async def in_flight(self) -> int:
        async with self.client.get(self.url + "/metrics") as response:
            found = _IN_FLIGHT_METRIC.search(await response.read())
        return int(float(found.group(1))) if found else 0

    async def park(self, execution_id: str) -> list[asyncio.Task[dict[str, Any]]]:
        """IN_FLIGHT parked calls of one execution, steps 1..IN_FLIGHT, all attached when this returns."""
        base = await self.in_flight()
        calls = [
            asyncio.create_task(self.execute("park", execution_id, step)) for step in range(1, IN_FLIGHT + 1)
        ]
        deadline = time.perf_counter() + 60
        while await self.in_flight() < base + IN_FLIGHT:
            if time.perf_counter() > deadline:
                for call in calls:
                    call.cancel()
                raise TimeoutError("the parked calls never all reached the Tool Pod")
            await asyncio.sleep(0.005)
        await asyncio.sleep(SETTLE_S)  # the pod finishes what admitting 100 calls left to do (their logs)
        return calls

    def drain_body(self, execution_id: str) -> dict[str, Any]:
        return {
            "request_id": uuid.uuid4().hex,
            "execution_id": execution_id,
            "reason": "bench",
            "deadline_at_ms": time.time_ns() // 1_000_000 + 30_000,
            "workspace_id": APP_ID,
        }

    async def drain_until_completed(self, body: dict[str, Any]) -> float:
        started = time.perf_counter()
        while True:
            status, answer = await self.post("/drain", body)
            if status == 200:
                if answer["outcome"] != "completed":
                    raise RuntimeError(f"the drain ended {answer['outcome']}")
                return time.perf_counter() - started
            if status != 202:
                raise RuntimeError(f"/drain answered {status}: {answer}")


async def _drain(pod: Pod) -> None:
    loaded: list[float] = []
    answered: list[float] = []
    idle: list[float] = []
    for _ in range(ROUNDS):
        # Baseline: an execution served here, nothing in flight.
        quiet = f"idle-{uuid.uuid4().hex}"
        await pod.execute("noop", quiet, 1)
        idle.append(await pod.drain_until_completed(pod.drain_body(quiet)))
        # 100 cooperative calls in flight.
        busy = f"busy-{uuid.uuid4().hex}"
        calls = await pod.park(busy)
        started = time.perf_counter()
        loaded.append(await pod.drain_until_completed(pod.drain_body(busy)))
        outcomes = await asyncio.gather(*calls)
        answered.append(time.perf_counter() - started)
        categories = {outcome["error"]["category"] for outcome in outcomes}
        if categories != {"execution_drained"}:
            raise RuntimeError(f"drained calls answered {categories}")
    print(f"drain: {ROUNDS} rounds, {IN_FLIGHT} cooperative calls in flight on one Tool Pod")
    print(_summary("baseline: /drain, nothing in flight", idle))
    print(_summary(f"/drain -> completed, {IN_FLIGHT} in flight", loaded, idle))
    print(_summary(f"/drain -> all {IN_FLIGHT} calls answered", answered, idle))


async def _interrupt(pod: Pod) -> None:
    answer: list[float] = []
    cancelled: list[float] = []
    not_found: list[float] = []
    plain: list[float] = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        await pod.execute("noop", f"plain-{uuid.uuid4().hex}", 1)
        plain.append(time.perf_counter() - started)
        execution = f"int-{uuid.uuid4().hex}"
        calls = await pod.park(execution)
        body = {"execution_id": execution, "step_number": 0, "workspace_id": APP_ID}
        started = time.perf_counter()
        _, said = await pod.post("/interrupt/call", body)
        not_found.append(time.perf_counter() - started)
        if said["outcome"] != "not_found":
            raise RuntimeError(json.dumps(said))
        target = calls[IN_FLIGHT // 2]
        started = time.perf_counter()
        _, said = await pod.post("/interrupt/call", body | {"step_number": IN_FLIGHT // 2 + 1})
        answer.append(time.perf_counter() - started)
        if said["outcome"] != "interrupted":
            raise RuntimeError(json.dumps(said))
        outcome = await target
        cancelled.append(time.perf_counter() - started)
        if outcome["error"]["category"] != "interrupted":
            raise RuntimeError(json.dumps(outcome))
        if sum(call.done() for call in calls) != 1:
            raise RuntimeError("an interrupt stopped more than its one call")
        await pod.drain_until_completed(pod.drain_body(execution))  # the other 99 go
        await asyncio.gather(*calls)
    print(f"interrupt: {ROUNDS} rounds, one call among {IN_FLIGHT} in flight")
    print(_summary("baseline: /interrupt/call -> not_found", not_found))
    print(_summary("baseline: /execute of a tool that returns", plain))
    print(_summary("/interrupt/call -> interrupted", answer, not_found))
    print(_summary("-> the interrupted call's own answer", cancelled, plain))


async def _measure(port: int) -> None:
    pod = Pod(port)
    try:
        await _drain(pod)
        await _interrupt(pod)
    finally:
        await pod.client.close()


def _run(coroutine: Awaitable[None]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop ships with the runtime extra
        asyncio.run(coroutine)  # type: ignore[arg-type]
        return
    uvloop.run(coroutine)  # type: ignore[arg-type]


def main() -> None:
    print("load average before: {:.2f} {:.2f} {:.2f} (2 cores shared)".format(*os.getloadavg()))
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-drain-") as tmp:
        index = write_bundle(build_bundle([]), Path(tmp) / "bundle")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "PYTHONPATH": str(REPO_ROOT),
            "RUNNER_MODE": "tool",
            "APP_HOST": "127.0.0.1",
            "RUNTIME_PORT": str(port),
            "RUNTIME_TOKEN": TOKEN,
            "APP_ID": APP_ID,
            "AGENTIC_CONNECTOR_BUNDLE_PATH": str(index),
            "AGENT_ENTRYPOINT": "tests.benchmarks.drain_tenant:app",
        }
        pod = subprocess.Popen(
            [sys.executable, "-m", "agent_runtime.launcher"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port("127.0.0.1", port, proc=pod)
            _run(_measure(port))
        finally:
            pod.terminate()
            try:
                pod.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pod.kill()
                pod.wait()


if __name__ == "__main__":
    main()
