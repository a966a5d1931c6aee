"""Rotating the runtime token between the SDK's MemoryClient and a real Memory server while calls run.

Server and client each read their own kubelet-style copy of the token Secret; the client's copy changes
first, then the server's (a sender ahead of its receiver), then a second rotation the other way round. No
call may fail, and after the grace period the old tokens are refused.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from agent_runtime.sdk import MemoryClient
from tests.conftest import Process
from tests.integration.memory.launched import start_memory
from tests.mounted_secret import mount_secret_key

GRACE_S = 8.0
TOKENS = ("memory-rotation-one-5d2a", "memory-rotation-two-b7e4", "memory-rotation-three-0c9f")


def test_memory_calls_survive_a_rolling_token_rotation(tmp_path: Path, spawn: Callable[..., Process]) -> None:
    server_dir, client_dir = tmp_path / "server-token", tmp_path / "client-token"
    server_file = mount_secret_key(server_dir, TOKENS[0])
    client_file = mount_secret_key(client_dir, TOKENS[0])
    grace = {"RUNTIME_TOKEN_GRACE_S": str(GRACE_S)}
    server = start_memory(
        spawn, tmp_path, token=TOKENS[0], extra={"RUNTIME_TOKEN_FILE": str(server_file), **grace}
    )
    env = {"AGENTIC_MEMORY_URL": server.base_url, "RUNTIME_TOKEN_FILE": str(client_file), **grace}
    stop = threading.Event()
    counts = {"calls": 0}
    failures: list[str] = []
    lock = threading.Lock()

    def record(error: Exception | None) -> None:
        with lock:
            counts["calls"] += 1
            if error is not None:
                failures.append(f"{type(error).__name__}: {error}")

    def sync_worker(worker: int) -> None:
        client = MemoryClient.from_env(env)  # one per "process": each follows the mounted file itself
        n = 0
        while not stop.is_set():
            n += 1
            try:
                client.write_sync(f"note {worker}-{n}", namespace="rotation", user_id="u", org_id="o")
                client.search_sync("note", namespace="rotation", user_id="u", org_id="o", top_k=3)
                record(None)
            except Exception as exc:  # every failure counts, whatever it is
                record(exc)
        asyncio.run(client.aclose())

    def async_worker() -> None:
        async def run() -> None:
            client = MemoryClient.from_env(env)
            while not stop.is_set():
                try:
                    await client.search("note", namespace="rotation", user_id="u", org_id="o", top_k=3)
                    record(None)
                except Exception as exc:
                    record(exc)
            await client.aclose()

        asyncio.run(run())

    threads = [threading.Thread(target=sync_worker, args=(n,)) for n in range(2)]
    threads.append(threading.Thread(target=async_worker))
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        mount_secret_key(client_dir, TOKENS[1])  # the sender's kubelet first
        time.sleep(2.0)
        mount_secret_key(server_dir, TOKENS[1])
        time.sleep(2.0)
        mount_secret_key(server_dir, TOKENS[2])  # then the receiver's first
        time.sleep(2.0)
        mount_secret_key(client_dir, TOKENS[2])
        last_change = time.monotonic()
        time.sleep(1.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    print(f"\nmemory token rotation: {counts['calls']} calls, {len(failures)} failed")
    assert failures == [], failures[:5]
    assert counts["calls"] >= 20

    time.sleep(max(0.0, last_change + GRACE_S + 1.5 - time.monotonic()))
    body = {"namespace": "rotation", "org_id": "o", "user_id": "u", "query": "note"}
    url = f"{server.base_url}/memory/semantic/search"
    for old in TOKENS[:2]:
        assert httpx.post(url, json=body, headers={"authorization": f"Bearer {old}"}).status_code == 401
    assert httpx.post(url, json=body, headers={"authorization": f"Bearer {TOKENS[2]}"}).status_code == 200
    output = server.process.output()
    assert output.count("the runtime token changed") == 2
    assert not any(token in output for token in TOKENS)
