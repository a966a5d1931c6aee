"""The example agent: a model that uses tools, governed end to end by the platform.

`build` is the entrypoint (a builder): the Tool Pod calls it once at start-up to learn the model registered
with `app.llm`; the AER calls it for each execution and runs what it returns. Every model and tool call in
`run` goes through the Orchestration Engine: policy, audit, replay, and approval for `sign_message`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Annotated, Any

from pydantic import Field

from agent_runtime.llm import ChatCompletionsModel
from agent_runtime.sdk import App, RequestContext, tool_loop

app = App("echo-agent")

SYSTEM_PROMPT = (
    "You are the echo agent. Use the tools to answer: count words with word_count, fetch an echo with "
    "echo_getEcho, and sign text with sign_message when the user asks for a signature."
)


@app.tool(is_local=True)
def word_count(text: str) -> dict[str, int]:
    """Count the words and characters in a text."""
    return {"words": len(text.split()), "characters": len(text)}


@app.tool(required_secrets=["ECHO_SIGNING_KEY"], sensitive=True, timeout_s=5)
def sign_message(
    message: Annotated[str, Field(max_length=10_000, description="text to sign")],
) -> dict[str, str]:
    """Sign a message with the tenant's signing key (HMAC-SHA256); the key never leaves the Tool Pod."""
    key = os.environ["ECHO_SIGNING_KEY"].encode()
    return {"signature": hmac.new(key, message.encode(), hashlib.sha256).hexdigest()}


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
