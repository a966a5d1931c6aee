"""Per-step added latency of the TypeScript AER (and Tool Pod) against the Python ones, in the same run.

Two platforms on loopback, each the Python OE (SQLite) with its own AER and Tool Pod: one the Python
launcher, one the TS launcher (`node .../launcher.js`, runtime-ts/packages/runner), running twin tenants
(tests/integration/loop/tenant/loop_agent.py and runtime-ts/packages/runner/test/tenants/loop_agent.ts).
An execution makes STEPS governed calls, half a remote tool (AER -> OE -> Tool Pod, `shout`) and half a
local one (AER -> OE -> back to the AER, `word_count`); a run of no calls is its baseline. Each is timed
from `POST /invoke` to its `completed` event on the OE's event stream, rounds interleaved between the two
platforms after WARMUP rounds (node's JIT warms up over its first few hundred requests), and a step costs
(median(with calls) - median(without)) / STEPS. Needs `make ts`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.conftest import Process
from tests.integration.loop.harness import Platform
from tests.integration.ts_runner.node_platform import node_platform

STEPS = 20
ROUNDS = int(os.environ.get("BENCH_TS_AER_ROUNDS", "15"))
WARMUP = 8  # node JIT-compiles the hot paths over its first few hundred requests


def _spawner(logs: Path) -> Any:
    def spawn(argv: list[str], *, env: dict[str, str] | None = None, name: str = "", **_: object) -> Process:
        log_path = Path(tempfile.mkstemp(prefix=f"{name or 'proc'}-", suffix=".log", dir=logs)[1])
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return Process(argv=argv, popen=popen, log_path=log_path, name=name)

    return spawn


def _task(steps: int) -> dict[str, Any]:
    calls = [
        ["shout", {"text": f"s{i}"}] if i % 2 == 0 else ["word_count", {"text": f"a b {i}"}]
        for i in range(steps)
    ]
    return {"mode": "calls", "calls": calls}


def _timed_run(platform: Platform, steps: int) -> float:
    """Seconds from POST /invoke to the `completed` event of the execution it started."""
    with platform.client() as client:
        started = time.perf_counter()
        response = client.post("/invoke", json={"agent": "team-a/loop", "input": _task(steps)})
        execution_id = response.json()["execution_id"]
        with client.stream("GET", f"/execution/{execution_id}/events") as stream:
            for line in stream.iter_lines():
                if not line.startswith("data: "):
                    continue
                kind = json.loads(line.removeprefix("data: "))["type"]
                if kind in ("completed", "failed", "suspended", "cancelled"):
                    elapsed = time.perf_counter() - started
                    if kind != "completed":
                        raise RuntimeError(f"execution {execution_id} ended {kind}")
                    return elapsed
    raise RuntimeError(f"the event stream of {execution_id} ended without an outcome")


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-ts-aer-"))
    logs = root / "logs"
    logs.mkdir()
    for name in ("python", "ts"):
        (root / name).mkdir()
    spawn = _spawner(logs)
    urls = {"llm_base_url": "http://127.0.0.1:9/v1", "provider_url": "http://127.0.0.1:9"}
    platforms: dict[str, Platform] = {}
    try:
        platforms["python"] = Platform(tmp=root / "python", spawn=spawn, **urls).start()
        platforms["ts"] = node_platform(root / "ts", spawn, **urls).start()
        samples: dict[tuple[str, int], list[float]] = {
            (name, n): [] for name in platforms for n in (0, STEPS)
        }
        for round_number in range(WARMUP + ROUNDS):
            for name, platform in platforms.items():  # interleaved: both see the same machine load
                for steps in (0, STEPS):
                    elapsed = _timed_run(platform, steps)
                    if round_number >= WARMUP:
                        samples[(name, steps)].append(elapsed)
        per_step = {}
        for name in platforms:
            base = statistics.median(samples[(name, 0)])
            full = statistics.median(samples[(name, STEPS)])
            per_step[name] = (full - base) / STEPS
            step_ms = per_step[name] * 1000
            print(
                f"{name:>6}: execution of 0 calls {base * 1000:7.2f} ms, of {STEPS} calls "
                f"{full * 1000:7.2f} ms (medians of {ROUNDS}); per governed step {step_ms:6.3f} ms"
            )
        added = per_step["ts"] - per_step["python"]
        ts, python = per_step["ts"] * 1000, per_step["python"] * 1000
        print(
            f"TS runner per step: {ts:.3f} ms vs Python {python:.3f} ms: {added * 1000:+.3f} ms added per "
            f"step, ratio {ts / python:.2f}"
        )
    finally:
        for platform in platforms.values():
            for proc in platform.processes.values():
                proc.stop()


if __name__ == "__main__":
    main()
