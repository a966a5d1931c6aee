"""The LangGraph.js SDK's figures (issue 40 part B), each against a baseline measured in the same run.

1. A governed LangGraph.js turn against the same graph bare. The SDK's failure_agent tenant
   (runtime-ts/packages/sdk-langgraph/test/tenants) through the Python OE (SQLite) and the TS AER and Tool
   Pod (app.checkpointer() over memory), timed from `POST /invoke` to the `completed` event, against its
   bare twin (scripts/bench_bare_turn.mjs: the same createReactAgent, ChatOpenAI and tool, a MemorySaver,
   no platform) in one node process. Both ask the same loopback LLM peer; a turn is 3 steps (model,
   `echo`, model). Rounds are interleaved after a warm-up.
2. The platform checkpointer against the backend saver it wraps: put and getTuple p50 in A-B-B-A rounds in
   one node process (scripts/bench_checkpointer.mjs), on memory, a SQLite file and MongoDB (FerretDB).

Needs `make ts`. Figures are printed, never asserted.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from tests.benchmarks.bench_ts_aer import _spawner
from tests.conftest import REPO_ROOT
from tests.integration.ferretdb import running_ferretdb
from tests.integration.langgraph_ts.example_platform import example_platform, sdk_tenant
from tests.integration.loop.harness import LLM_KEY, Platform
from tests.providers.llm_peer import Turn, running_llm_peer

SDK = REPO_ROOT / "runtime-ts" / "packages" / "sdk-langgraph"
ROUNDS = int(os.environ.get("BENCH_LANGGRAPH_TS_ROUNDS", "15"))
WARMUP = 5
STEPS = 3
TASK = {"messages": [{"role": "user", "content": "echo hi"}]}


def _timed_run(platform: Platform) -> float:
    """Seconds from POST /invoke to the `completed` event of the execution it started."""
    with platform.client() as client:
        started = time.perf_counter()
        response = client.post("/invoke", json={"agent": "team-a/loop", "input": TASK})
        execution_id = response.json()["execution_id"]
        with client.stream("GET", f"/execution/{execution_id}/events") as stream:
            for line in stream.iter_lines():
                if not line.startswith("data: "):
                    continue
                kind = json.loads(line.removeprefix("data: "))["type"]
                if kind in ("completed", "failed", "suspended", "cancelled"):
                    if kind != "completed":
                        raise RuntimeError(f"execution {execution_id} ended {kind}")
                    return time.perf_counter() - started
    raise RuntimeError(f"the event stream of {execution_id} ended without an outcome")


def _script() -> tuple[Turn, Turn]:
    return Turn.calls(("echo", {"text": "hi"})), Turn.answer("hi")


def _turns(root: Path) -> None:
    spawn = _spawner(root / "logs")
    with running_llm_peer(api_key=LLM_KEY) as peer:
        # Memory checkpoints on both sides: the difference is the platform, not the store.
        env = {"CHECKPOINT_STORE": "memory", "FAILURE_AGENT_SAVER": "platform"}
        platform = example_platform(
            root / "platform",
            spawn,
            llm_base_url=peer.base_url,
            refund_url="http://127.0.0.1:9",
            checkpoint_env=env,
            tenant=sdk_tenant("failure_agent"),
        )
        bare_env = {
            "PATH": os.environ.get("PATH", ""),
            "BENCH_LLM_KEY": LLM_KEY,
            "BENCH_LLM_BASE_URL": peer.base_url,
        }
        bare = subprocess.Popen(
            ["node", str(SDK / "scripts" / "bench_bare_turn.mjs")],
            cwd=SDK,
            env=bare_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        governed: list[float] = []
        plain: list[float] = []
        try:
            for round_number in range(WARMUP + ROUNDS):
                peer.push(*_script())
                elapsed = _timed_run(platform)
                assert bare.stdin is not None and bare.stdout is not None
                peer.push(*_script())
                bare.stdin.write("run\n")
                bare.stdin.flush()
                bare_ms = float(bare.stdout.readline())
                if round_number >= WARMUP:
                    governed.append(elapsed * 1000)
                    plain.append(bare_ms)
        finally:
            bare.kill()
            for proc in platform.processes.values():
                proc.stop()
    g, b = statistics.median(governed), statistics.median(plain)
    print(
        f"LangGraph.js turn of {STEPS} steps (model, tool, model), medians of {ROUNDS}: bare {b:.2f} ms, "
        f"governed {g:.2f} ms (invoke to completed, TS AER and Tool Pod, Python OE on SQLite); added "
        f"{g - b:.2f} ms per turn, {(g - b) / STEPS:.2f} ms per step including the execution's start "
        f"and end; "
        f"ratio {g / b:.2f}"
    )


def _checkpointer() -> None:
    with running_ferretdb() as uri:
        done = subprocess.run(
            ["node", str(SDK / "scripts" / "bench_checkpointer.mjs"), uri],
            cwd=SDK,
            # FerretDB on SQLite sorts a thread's checkpoints on each latest-read: keep threads short.
            env={**os.environ, "BENCH_CHECKPOINT_OPS": os.environ.get("BENCH_CHECKPOINT_OPS", "40")},
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"checkpointer p50 over {figures['ops']} ops a round, A-B-B-A (direct / platform):")
    for row in figures["results"]:
        print(
            f"  {row['backend']:>8}: put {row['put_direct_ms']:.3f} / {row['put_platform_ms']:.3f} ms, "
            f"getTuple {row['get_direct_ms']:.3f} / {row['get_platform_ms']:.3f} ms"
        )


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.1f}")
    root = Path(tempfile.mkdtemp(prefix="bench-langgraph-ts-"))
    (root / "logs").mkdir()
    (root / "platform").mkdir()
    _turns(root)
    _checkpointer()


if __name__ == "__main__":
    main()
