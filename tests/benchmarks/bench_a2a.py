"""An A2A `message/send` round trip against the client API's `/invoke` for the same turn (issue 38).

Real processes on loopback: a Tool Pod, an AER and the OE (SQLite); the turn is the bench tenant's run
that returns at once (`hold_s: 0`), so what differs is only the way in. Three ways, interleaved round by
round so load drifts hit each alike:

- baseline: `POST /invoke`, then the execution's event stream (`GET /execution/{id}/events`) until it
  ends, then `GET /execution/{id}` for the result: what a client of the OE's own API does;
- A2A, raw: one JSON-RPC `SendMessage` (blocking) to `/a2a/{ns}/{agent}/` with httpx;
- A2A, official client: the same through a2a-sdk's client (its protobuf conversions included).

Medians, p90 and the ratio to the baseline; the OE's CPU per turn for each way.

Then a child Agent call against a plain tool call (`tests/integration/a2a/child.py`): the loop tenant's
turn with one `shout` call (a Tool Pod tool), against the same turn whose one call is `a2a_child.run`,
an A2A `SendMessage` from the Tool Pod to the OE that starts a child execution doing that `shout`. Each
turn is `/invoke` + its event stream to the end + `GET /execution/{id}`, interleaved; the added p50 is
what a governed child execution costs over the plain call. A third way is the same child by reference
(`agent.loop`, agentRef): the OE starts the child itself, with no Tool Pod and no A2A hop in between.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf import json_format, struct_pb2

from tests.benchmarks.bench_oe import AGENT, CLIENT_TOKEN, Stack, _ms
from tests.benchmarks.bench_toolpod import _cpu_seconds, _percentile
from tests.conftest import Process
from tests.integration.a2a.child import CHILD_TOOL, REF_TOOL, child_platform
from tests.integration.loop.harness import AGENT as LOOP_AGENT
from tests.integration.loop.harness import CLIENT_TOKEN as LOOP_TOKEN
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

ROUNDS = 60
WARMUP = 5
TURN = {"hold_s": 0}
CHILD_ROUNDS = 30
PLAIN = {"mode": "calls", "calls": [["shout", {"text": "hi"}]]}
VIA_CHILD = {"mode": "calls", "calls": [[CHILD_TOOL, {"data": PLAIN}]]}
VIA_REF = {"mode": "calls", "calls": [[REF_TOOL, {"input": PLAIN}]]}


async def _invoke_turn(client: httpx.AsyncClient) -> None:
    response = await client.post("/invoke", json={"agent": AGENT, "input": TURN})
    execution_id = response.json()["execution_id"]
    async with client.stream("GET", f"/execution/{execution_id}/events") as events:
        async for line in events.aiter_lines():
            if line.startswith("event: ") and line[7:] in ("completed", "failed", "cancelled"):
                break
    view = (await client.get(f"/execution/{execution_id}")).json()
    if view["status"] != "completed":
        raise RuntimeError(f"the turn ended {view['status']}")


async def _raw_turn(client: httpx.AsyncClient, path: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"data": TURN}]}
        },
    }
    answer = (await client.post(path, json=body, headers={"a2a-version": "1.0"})).json()
    if answer["result"]["task"]["status"]["state"] != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"the task ended {answer}")


def _message() -> Message:
    part = Part(media_type="application/json")
    part.data.CopyFrom(json_format.ParseDict(TURN, struct_pb2.Value()))
    return Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[part])


async def _measure(oe_port: int, oe_pid: int) -> dict[str, tuple[list[float], float]]:
    base = f"http://127.0.0.1:{oe_port}"
    path = f"/a2a/{AGENT}/"
    headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, base + path).get_agent_card()
        official = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)

        async def official_turn() -> None:
            async for answer in official.send_message(SendMessageRequest(message=_message())):
                if answer.task.status.state != 3:  # TASK_STATE_COMPLETED
                    raise RuntimeError(f"the task ended {answer}")

        ways = {
            "invoke + events + get": lambda: _invoke_turn(http),
            "A2A SendMessage (httpx)": lambda: _raw_turn(http, path),
            "A2A SendMessage (a2a-sdk client)": official_turn,
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, float] = dict.fromkeys(ways, 0.0)
        for round_ in range(WARMUP + ROUNDS):
            for name, turn in ways.items():
                before = _cpu_seconds(oe_pid)
                started = time.perf_counter()
                await turn()
                elapsed = time.perf_counter() - started
                if round_ >= WARMUP:
                    times[name].append(elapsed)
                    cpu[name] += _cpu_seconds(oe_pid) - before
        await official.close()
    return {name: (times[name], cpu[name] / ROUNDS) for name in ways}


async def _loop_turn(client: httpx.AsyncClient, task: dict[str, object]) -> None:
    response = await client.post("/invoke", json={"agent": LOOP_AGENT, "input": task})
    execution_id = response.json()["execution_id"]
    async with client.stream("GET", f"/execution/{execution_id}/events") as events:
        async for line in events.aiter_lines():
            if line.startswith("event: ") and line[7:] in ("completed", "failed", "cancelled", "suspended"):
                break
    view = (await client.get(f"/execution/{execution_id}")).json()
    if view["status"] != "completed" or "error" in str(view["result"]):
        raise RuntimeError(f"the turn ended {view['status']}: {view.get('result')}")


async def _measure_child(oe_url: str) -> dict[str, list[float]]:
    ways = {
        "plain tool call (shout)": PLAIN,
        "child over A2A (a2a_child.run -> shout)": VIA_CHILD,
        "child by agentRef (agent.loop -> shout)": VIA_REF,
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    headers = {"authorization": f"Bearer {LOOP_TOKEN}"}
    async with httpx.AsyncClient(base_url=oe_url, headers=headers, timeout=60) as http:
        for round_ in range(WARMUP + CHILD_ROUNDS):
            for name, task in ways.items():
                started = time.perf_counter()
                await _loop_turn(http, task)
                if round_ >= WARMUP:
                    times[name].append(time.perf_counter() - started)
    return times


def _child_figures(tmp: Path) -> dict[str, list[float]]:
    started: list[Process] = []

    def spawn(argv: list[str], *, env: dict[str, str] | None = None, name: str = "") -> Process:
        log_path = tmp / f"{name or 'proc'}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        proc = Process(argv=argv, popen=popen, log_path=log_path, name=name)
        started.append(proc)
        return proc

    try:
        with running_llm_peer() as llm, running_echo_provider() as provider:
            platform = child_platform(
                tmp=tmp, spawn=spawn, llm_base_url=llm.base_url, provider_url=provider.url
            )
            return asyncio.run(_measure_child(platform.oe_url))
    finally:
        for proc in started:
            proc.stop(timeout=5)


def _report_child(figures: dict[str, list[float]]) -> None:
    baseline = statistics.median(next(iter(figures.values())))
    print(f"{CHILD_ROUNDS} loop-tenant turns each way, interleaved (one call each):")
    for name, times in figures.items():
        p50 = statistics.median(times)
        print(
            f"  {name:44s} p50 {_ms(p50)}  p90 {_ms(_percentile(times, 0.9))}  "
            f"x{p50 / baseline:.2f} (added p50 {_ms(p50 - baseline)})"
        )


def main() -> None:
    print("load average before: {:.2f} {:.2f} {:.2f} (2 cores shared)".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="bench-a2a-") as tmp:
        stack = Stack(Path(tmp))
        try:
            stack.start_runtimes()
            oe, oe_port = stack.start_oe({"OE_SQLITE_PATH": str(Path(tmp) / "oe.sqlite3")})
            figures = asyncio.run(_measure(oe_port, oe.pid))
        finally:
            stack.stop()
    baseline = statistics.median(next(iter(figures.values()))[0])
    print(f"{ROUNDS} turns each way, interleaved (a turn that returns at once, no steps):")
    for name, (times, cpu) in figures.items():
        p50 = statistics.median(times)
        print(
            f"  {name:34s} p50 {_ms(p50)}  p90 {_ms(_percentile(times, 0.9))}  "
            f"x{p50 / baseline:.2f} of the baseline (added p50 {_ms(p50 - baseline)})  OE CPU/turn {_ms(cpu)}"
        )
    with tempfile.TemporaryDirectory(prefix="bench-a2a-child-") as tmp:
        _report_child(_child_figures(Path(tmp)))
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
