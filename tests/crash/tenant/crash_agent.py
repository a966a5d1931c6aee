"""The six-step agent of the crash campaign (on PYTHONPATH as `crash_agent`).

Steps, in order: 1 `lookup` (a read), 2 `reserve`, 3 `note` (a local tool: it runs in the AER), 4 `charge`
(sensitive: the policy holds it for approval), 5 `ship`, 6 `notify`. Every step but the first POSTs one
side effect to the ledger provider with the call's idempotency key, which the provider counts. Between
steps (and before the first and after the last) the agent waits at a gate: plain agent code, not a step,
that writes `at-<k>` and waits for `go-<k>` in the run's gate directory, so a test can kill a process
exactly at a step boundary.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import httpx

from agent_runtime.sdk import App, PolicyDeniedException, ToolExecutionError, idempotency_key

app = App("crash-agent")

STEPS = ("lookup", "reserve", "note", "charge", "ship", "notify")
_GATE_LIMIT_S = 300.0


def _effect(action: str, provider: str, order: str) -> dict[str, Any]:
    with httpx.Client(trust_env=False, timeout=120) as client:
        response = client.post(
            f"{provider}/effects/{action}",
            json={"order": order},
            headers={"Idempotency-Key": idempotency_key()},
        )
    response.raise_for_status()
    return {"applied": action}


@app.tool(timeout_s=150)
def lookup(provider: str, order: str) -> dict[str, Any]:
    """Read the item the order is for."""
    with httpx.Client(trust_env=False, timeout=30) as client:
        return dict(client.get(f"{provider}/lookup/{order}").json())


@app.tool(timeout_s=150)
def reserve(provider: str, order: str) -> dict[str, Any]:
    """Reserve the stock."""
    return _effect("reserve", provider, order)


@app.tool(is_local=True, timeout_s=150)
def note(provider: str, order: str) -> dict[str, Any]:
    """Write a note about the order (runs in the AER)."""
    return _effect("note", provider, order)


@app.tool(sensitive=True, timeout_s=150)
def charge(provider: str, order: str) -> dict[str, Any]:
    """Charge the customer: sensitive, so a human approves it first."""
    return _effect("charge", provider, order)


@app.tool(timeout_s=150)
def ship(provider: str, order: str) -> dict[str, Any]:
    """Ship the order."""
    return _effect("ship", provider, order)


@app.tool(timeout_s=150)
def notify(provider: str, order: str) -> dict[str, Any]:
    """Tell the customer."""
    return _effect("notify", provider, order)


async def _gate(directory: str, boundary: int) -> None:
    """Say the run reached `boundary`, then wait until the test lets it through."""
    with open(os.path.join(directory, f"at-{boundary}"), "a", encoding="utf-8") as mark:  # noqa: ASYNC230
        mark.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + _GATE_LIMIT_S
    while not os.path.exists(os.path.join(directory, f"go-{boundary}")):  # noqa: ASYNC240
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {boundary} never opened")
        await asyncio.sleep(0.02)


@app.entrypoint
async def run(task: dict[str, Any]) -> Any:
    provider, order, gates = task["provider"], task["order"], task["gates"]
    results: list[Any] = []
    await _gate(gates, 0)
    for boundary, name in enumerate(STEPS, start=1):
        try:
            results.append(await app.call_tool(name, {"provider": provider, "order": order}))
        except ToolExecutionError as exc:  # the agent sees a tool's failure and goes on
            results.append({"error": exc.error.category, "why": exc.error.explanation})
        except PolicyDeniedException as exc:
            results.append({"denied": exc.reason})
        await _gate(gates, boundary)
    return {"results": results}
