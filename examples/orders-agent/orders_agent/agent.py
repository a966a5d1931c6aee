"""The orders agent: answers questions about the shop's orders from PostgreSQL, tells the team on Slack,
and publishes order events to the shop's webhook.

Its tools are the built-in connectors the Agent names (no tool code here): `postgres.query` reads (guarded,
READ ONLY, row-capped); `slack.post_message` and `webhook.send` write, so they are sensitive and the
Orchestration Engine holds each for a person's approval before it runs. A model sees the tools under
their model names (`postgres__query`, ...); the platform maps them back, so policy and audit keep the dots.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agent_runtime.llm import ChatCompletionsModel
from agent_runtime.sdk import App, RequestContext, tool_loop

app = App("orders-agent")

SYSTEM_PROMPT = (
    "You help the shop's support team with orders. Read the database with postgres__query (one read-only "
    "SELECT; tables: orders(id, customer, status, total_cents, updated_at)). Tell the team on Slack with "
    "slack__post_message (channel #orders) and publish order events with webhook__send; a person approves "
    "each message and event before it is sent. Answer briefly."
)


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    """Register the model (endpoint, model name and key env come from the Agent) and return the run."""
    llm = app.llm(ChatCompletionsModel.from_env(os.environ), llm_id="main")

    async def run(task: Any) -> dict[str, Any]:
        text = task.get("text") if isinstance(task, dict) else None
        messages = [
            {"type": "system", "content": SYSTEM_PROMPT},
            {"type": "human", "content": text if isinstance(text, str) else json.dumps(task)},
        ]
        final = await tool_loop(llm, messages, tools=list(ctx.tools))
        return {"answer": final["content"]}

    return run
