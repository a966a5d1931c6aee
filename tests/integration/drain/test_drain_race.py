"""DR-13 on a real Tool Pod: a drain racing calls that are just starting never says `completed` while one
of their bodies still runs; a call refused at admission never runs, and one that ran was cancelled."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from agent_runtime.connectors import build_bundle, write_bundle
from tests.conftest import REPO_ROOT, Process
from tests.integration.drain.harness import APP_ID, TENANT_DIR
from tests.integration.runtime.launched import RUNTIME_TOKEN, launch, new_port

CALLS = 40
ROUNDS = 5


def test_a_drain_racing_starting_calls_never_says_completed_while_a_body_runs(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    port = new_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": f"{TENANT_DIR}{os.pathsep}{REPO_ROOT}",
        "RUNNER_MODE": "tool",
        "APP_HOST": "127.0.0.1",
        "RUNTIME_PORT": str(port),
        "RUNTIME_TOKEN": RUNTIME_TOKEN,
        "APP_ID": APP_ID,
        "AGENT_ENTRYPOINT": "drain_agent:app",
        "AGENTIC_CONNECTOR_BUNDLE_PATH": str(write_bundle(build_bundle([]), tmp_path / "bundle")),
    }
    pod = launch(spawn, {**env, "RUNNER_MODE": "tool"}, token=RUNTIME_TOKEN)
    results = asyncio.run(_race(pod.url, tmp_path))
    for round_results in results:
        started = [step for step, marker in round_results["markers"].items() if marker.exists()]
        # At the moment the drain said completed, no body that had started was still running.
        assert all(step in round_results["ended_at_completed"] for step in started), round_results
        categories = {outcome["error"]["category"] for outcome in round_results["outcomes"]}
        assert categories <= {"execution_drained", "execution_draining"}, categories
        # A call refused at admission never started; a call that started was cancelled (one admitted just
        # before the drain may also be cancelled before its body's first line: it never started either).
        for step, outcome in enumerate(round_results["outcomes"], start=1):
            if round_results["markers"][step].exists():
                assert outcome["error"]["category"] == "execution_drained", (step, outcome)
            if outcome["error"]["category"] == "execution_draining":
                assert not round_results["markers"][step].exists(), (step, outcome)


async def _race(url: str, tmp: Path) -> list[dict[str, Any]]:
    headers = {"authorization": f"Bearer {RUNTIME_TOKEN}"}
    rounds = []
    async with aiohttp.ClientSession(
        headers=headers, connector=aiohttp.TCPConnector(limit=CALLS + 8)
    ) as http:

        async def post(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            async with http.post(url + path, json=body) as response:
                return response.status, dict(await response.json())

        for index in range(ROUNDS):
            execution = f"race-{uuid.uuid4().hex}"
            markers = {step: tmp / f"{index}-{step}.started" for step in range(1, CALLS + 1)}
            # One call first, so the execution is known here and the drain has something to settle.
            first = {"marker": str(markers[1]), "release": str(tmp / "never")}
            calls = [
                asyncio.create_task(
                    post(
                        "/execute",
                        {
                            "tool": "pod_hold_async",
                            "arguments": {"marker": str(markers[step]), "release": str(tmp / "never")}
                            if step > 1
                            else first,
                            "execution_id": execution,
                            "step": step,
                        },
                    )
                )
                for step in range(1, CALLS + 1)
            ]
            for _ in range(5000):
                if _exists(markers[1]):
                    break
                await asyncio.sleep(0.002)
            body = {
                "request_id": uuid.uuid4().hex,
                "execution_id": execution,
                "reason": "race",
                "deadline_at_ms": time.time_ns() // 1_000_000 + 20_000,
                "workspace_id": APP_ID,
            }
            # The drain goes out while the other calls are still arriving and being admitted.
            while True:
                status, answer = await post("/drain", body)
                if status == 200:
                    assert answer["outcome"] == "completed", answer
                    break
                assert status == 202, answer
            ended = {step for step, marker in markers.items() if _exists(Path(f"{marker}.ended"))}
            outcomes = [answer for _, answer in await asyncio.gather(*calls)]
            rounds.append({"markers": markers, "ended_at_completed": ended, "outcomes": outcomes})
    return rounds


def _exists(path: Path) -> bool:
    return path.exists()  # a stat of a local temp file, on purpose in the loop
