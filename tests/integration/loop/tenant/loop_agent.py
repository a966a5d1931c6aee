"""The tenant App the agent-loop tests run in a real AER and Tool Pod (on PYTHONPATH as `loop_agent`).

`input.mode` picks what a run does: `llm` lets the scripted model drive a tool loop; `calls` makes
exactly the tool calls listed (so a test controls every step); `review` is the seed's four-step example
(lookup, query, a human review, then a notification); anything else fails the entrypoint.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from agent_runtime.llm import ChatCompletionsModel
from agent_runtime.sdk import App, RequestContext, idempotency_key, tool_loop
from agent_runtime.sdk.memory import MemoryClient

app = App("loop-agent")


@app.tool(is_local=True)
def word_count(text: str) -> dict[str, int]:
    """Count the words in a text."""
    return {"words": len(text.split())}


@app.tool
def shout(text: str) -> dict[str, str]:
    """Upper-case a text."""
    return {"loud": text.upper()}


@app.tool(sensitive=True, required_secrets=["LOOP_LEDGER"])  # a body sees only the env it declares
def transfer(amount: int, to: str) -> dict[str, Any]:
    """Move money: a side effect the tests count in the ledger file."""
    ledger = Path(os.environ["LOOP_LEDGER"])
    with ledger.open("a", encoding="utf-8") as out:
        out.write(f"{amount} {to}\n")
    return {"ok": True, "entries": len(ledger.read_text(encoding="utf-8").splitlines())}


@app.tool
def explode(text: str) -> dict[str, str]:
    """Always fails."""
    raise RuntimeError(f"exploded on {text}")


@app.tool
def ask_human(question: str) -> dict[str, Any]:
    """Stop for a human's answer."""
    app.suspend("a human must answer", {"question": question})


@app.tool(is_local=True, timeout_s=60)
def wait_for_file(path: str) -> dict[str, str]:
    """Block until a file exists (a test's way to hold a run between two steps)."""
    deadline = time.monotonic() + 55
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.05)
    return {"seen": path}


@app.tool
def lookup_policy(policy_id: str) -> dict[str, Any]:
    """Read a policy (no side effect)."""
    return {"policy_id": policy_id, "limit": 1000}


@app.tool
def query_mongogpt(question: str) -> dict[str, Any]:
    """Ask the claims database a question (no side effect)."""
    return {"question": question, "answer": "3 claims over the limit"}


@app.tool
def human_review(summary: str) -> dict[str, Any]:
    """Ask a human to approve; the resumed step answers with the decision."""
    app.suspend("a human must approve the claims", {"summary": summary})


@app.tool(required_secrets=["LOOP_LEDGER"])
def send_notification(text: str) -> dict[str, Any]:
    """Notify the claims team: a side effect the tests count in the ledger file."""
    ledger = Path(os.environ["LOOP_LEDGER"])
    with ledger.open("a", encoding="utf-8") as out:
        out.write(f"notify {text}\n")
    return {"sent": text}


@app.tool
def key_of_call() -> dict[str, str]:
    """The idempotency key of this call, as a provider would receive it."""
    return {"key": idempotency_key()}


@app.tool(is_local=True)
def local_key_of_call() -> dict[str, str]:
    """The same, from a local tool."""
    return {"key": idempotency_key()}


@app.tool(is_local=True)
def opaque(text: str) -> object:
    """Returns something that is not JSON."""
    return object()


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    llm = app.llm(ChatCompletionsModel.from_env(os.environ), llm_id="main")

    async def run(task: dict[str, Any]) -> Any:
        mode = task.get("mode", "llm")
        if mode == "llm":
            if task.get("remember"):  # a note to the Agent's Memory server first (AGENTIC_MEMORY_URL)
                await MemoryClient.from_env().write(task["remember"], namespace="notes")
            messages = [{"type": "human", "content": task["text"]}]
            final = await tool_loop(llm, messages, tools=list(ctx.tools))
            return {"answer": final["content"]}
        if mode == "calls":
            results = []
            for name, args in task["calls"]:
                try:
                    results.append(await app.call_tool(name, args))
                except Exception as exc:  # a tool failure or a denial: the agent sees it and goes on
                    results.append({"error": type(exc).__name__, "text": str(exc)})
            if task.get("quiet"):
                return {"kinds": [sorted(r) if isinstance(r, dict) else type(r).__name__ for r in results]}
            return {"results": results}
        if mode == "review":
            return await review(task)
        if mode == "astream":
            # The SDK's astream (B-13): the OE streams the model's tokens as events; the agent gets the
            # final message as its one chunk.
            chunks = [chunk async for chunk in llm.astream([{"type": "human", "content": task["text"]}])]
            return {"answer": chunks[-1]["content"], "chunks": len(chunks)}
        raise ValueError(f"unknown mode {mode!r}")

    async def review(task: dict[str, Any]) -> Any:
        policy = await app.call_tool("lookup_policy", {"policy_id": task["policy"]})
        # A test makes the resumed run ask another question: a diverging replay.
        variant = task.get("variant_file")
        diverge = bool(variant) and os.path.exists(variant)  # noqa: ASYNC240 - a tiny local check
        question = "anything else?" if diverge else "claims over the limit?"
        found = await app.call_tool("query_mongogpt", {"question": question})
        summary = f"{policy['policy_id']}: {found['answer']}"
        if task.get("agent_level"):
            decision = app.suspend("approve the claims?", {"summary": summary})
        else:
            decision = await app.call_tool("human_review", {"summary": summary})
        sent = await app.call_tool("send_notification", {"text": f"claims {decision['decision']}"})
        return {"decision": decision, "sent": sent}

    return run
