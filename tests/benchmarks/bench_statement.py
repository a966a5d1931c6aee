"""What the OE's signed statement adds to one step (issue 27), against the runtime token, in the same run.

Per step the OE makes a statement for the call (`AgentRegistration.statements`, reused while more than half
its 60 s life is left) and the Tool Pod's guard checks it (`StatementGuard`, which keeps what it verified
until it expires). Measured here through the real code: the OE's credentials for a step plus the Tool Pod's
ASGI guard around a no-op app, per step, against the runtime-token guard of before. Also the uncached
cost (a step of a new execution: sign + verify once) and HMAC-SHA256 for comparison: a verifier holding an
HMAC key could forge, which is why the OE signs with Ed25519 (docs/design.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import statistics
import time
from typing import Any

from agent_runtime.execution_token import (
    StatementSigner,
    StatementVerifier,
    generate_private_key_pem,
    public_key_pem,
)
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.runtime_auth import credentials
from agent_runtime.servers.auth import BearerTokenGuard, StatementGuard
from agent_runtime.token_file import RotatingToken

STEPS = 20_000
TOKEN = "bench-statement-runtime-token"
TARGET_MS = 0.1


async def _noop(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _run_guard(guard: Any, header: bytes) -> int:
    status = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {"type": "http", "path": "/execute", "headers": [(b"authorization", header)]}
    await guard(scope, None, send)
    return status


def _p50_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def main() -> None:
    pem = generate_private_key_pem()
    signer = StatementSigner(RotatingToken(pem, what="OE signing key"))
    verifier = StatementVerifier(RotatingToken(public_key_pem(pem), what="OE public key"))
    reg = AgentRegistration.model_validate(
        {
            "agent": "bench/agent",
            "token": TOKEN,
            "aerUrl": "http://127.0.0.1:9",
            "toolUrl": "http://127.0.0.1:9",
        }
    ).with_signer(signer)
    plain = reg.with_signer(None)
    token_guard = BearerTokenGuard(_noop, token=TOKEN)
    statement_guard = StatementGuard(_noop, verifier=verifier, audience="tool", workspace="bench.agent")

    async def measure() -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"token": [], "statement": [], "uncached": []}
        for step in range(STEPS):
            # Interleaved, so both see the same machine at the same moment.
            started = time.perf_counter()
            credential = credentials(plain, audience="tool", execution_id="ex-1")[0]
            assert await _run_guard(token_guard, f"Bearer {credential}".encode()) == 200
            out["token"].append(time.perf_counter() - started)
            started = time.perf_counter()
            credential = credentials(reg, audience="tool", execution_id="ex-1")[0]
            assert await _run_guard(statement_guard, f"Bearer {credential}".encode()) == 200
            out["statement"].append(time.perf_counter() - started)
            if step % 20 == 0:  # a new execution each time: nothing cached on either side
                started = time.perf_counter()
                credential = credentials(reg, audience="tool", execution_id=f"new-{step}")[0]
                assert await _run_guard(statement_guard, f"Bearer {credential}".encode()) == 200
                out["uncached"].append(time.perf_counter() - started)
        return out

    timings = asyncio.run(measure())
    key = b"k" * 32
    hmac_samples = []
    for step in range(2_000):
        started = time.perf_counter()
        mac = hmac.new(key, f"claims-{step}".encode(), hashlib.sha256).digest()
        hmac.compare_digest(mac, hmac.new(key, f"claims-{step}".encode(), hashlib.sha256).digest())
        hmac_samples.append(time.perf_counter() - started)

    token, statement = _p50_us(timings["token"]), _p50_us(timings["statement"])
    added_ms = (statement - token) / 1000
    print(f"{STEPS} steps, OE credentials + Tool Pod guard, p50 per step:")
    print(f"  runtime token (before)         {token:8.1f} us")
    print(f"  OE statement (cached, after)   {statement:8.1f} us")
    print(f"  added per step                 {added_ms * 1000:8.1f} us (target < {TARGET_MS * 1000:.0f} us)")
    print(f"  first step of an execution (sign + verify, Ed25519) {_p50_us(timings['uncached']):8.1f} us")
    print(f"  HMAC-SHA256 sign + verify, for comparison          {_p50_us(hmac_samples):8.1f} us")
    print("  within target" if added_ms < TARGET_MS else "  OVER TARGET")


if __name__ == "__main__":
    main()
