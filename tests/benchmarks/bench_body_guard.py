"""What `listen.BodyGuard` adds to a request, against the same app without it, same run, same bodies.

The app answers at once after one receive, so the figure is the guard alone: the body deadline
(`asyncio.timeout`), buffering and the JSON edge checks (nesting, NaN/Infinity, overflowing numbers).
Bodies: a tool call's `/tool/execute` (small), an LLM step carrying a 100-message conversation (many
brackets, little depth: the path that reads what is outside the strings), and a 1,024-number vector.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

from agent_runtime.listen import BodyGuard

ROUNDS = 3000


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def bodies() -> dict[str, bytes]:
    small = {"execution_id": "e-1", "step": 7, "tool": "shout", "args": {"text": "hello world"}}
    messages = [{"role": "user", "content": "a line of text\n" * 30} for _ in range(100)]
    llm = {"execution_id": "e-1", "step": 9, "tool": "invoke_llm", "llm_id": "m", "messages": messages}
    vector = {"namespace": "notes", "content": "x", "embedding": [0.0123456789] * 1024}
    return {
        name: json.dumps(body).encode()
        for name, body in (("tool call", small), ("LLM step, 100 messages", llm), ("1024-d vector", vector))
    }


async def _p50_us(app: Any, body: bytes) -> float:
    scope = {"type": "http", "method": "POST", "path": "/x", "headers": []}

    async def send(_: Any) -> None:
        return None

    times = []
    for _ in range(ROUNDS):
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        started = time.perf_counter_ns()
        await app(scope, receive, send)
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1000


async def _run() -> None:
    guarded = BodyGuard(_app, timeout_s=10)
    print(f"{ROUNDS} requests each, in-process ASGI, p50")
    for name, body in bodies().items():
        await _p50_us(guarded, body)  # warm up (numpy's first import on the slow path)
        bare = await _p50_us(_app, body)
        with_guard = await _p50_us(guarded, body)
        print(
            f"{name:24} ({len(body):6d} B): without {bare:6.1f} us, with BodyGuard {with_guard:7.1f} us, "
            f"added {with_guard - bare:6.1f} us"
        )


def main() -> None:
    asyncio.run(_run())


if __name__ == "__main__":
    main()
