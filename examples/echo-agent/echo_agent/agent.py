"""The example agent's App: one local tool, one Tool Pod tool that uses a secret, and the entrypoint."""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Annotated, Any

from pydantic import Field

from agent_runtime.sdk import App

app = App("echo-agent")


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
async def run(task: dict[str, Any]) -> dict[str, Any]:
    """The agent's main function: the AER runs it for each execution."""
    return {"echo": task}
