"""An A2A `message/send` round trip against the client API's `/invoke` for the same turn (issue 38).

Real processes on loopback: a Tool Pod, an AER and the OE (SQLite); the turn is the bench tenant's run
that returns at once (`hold_s: 0`), so what differs is only the way in. Three ways, interleaved round by
round so load drifts hit each alike:

- baseline: `POST /invoke`, then the execution's event stream (`GET /execution/{id}/events`) until it
  ends, then `GET /execution/{id}` for the result: what a client of the OE's own API does;
- A2A, raw: one JSON-RPC `SendMessage` (blocking) to `/a2a/{ns}/{agent}/` with httpx;
- A2A, official client: the same through a2a-sdk's client (its protobuf conversions included).

Medians, p90 and the ratio to the baseline; the OE's CPU per turn for each way.
"""

from __future__ import annotations

import asyncio
import os
import statistics
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

ROUNDS = 60
WARMUP = 5
TURN = {"hold_s": 0}


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
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
