"""The tenant App of the canary scan (on PYTHONPATH as `canary_agent`): tools that hand credentials back.

`input.mode` `llm` lets the scripted model drive a tool loop; `calls` makes exactly the calls listed and
returns every result (so they reach the execution's result).
"""

from __future__ import annotations

import base64
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agent_runtime.llm import ChatCompletionsModel
from agent_runtime.sdk import App, RequestContext, tool_loop

app = App("canary-agent")


@app.tool(required_secrets=["BEARER_TOKEN"])
def env_echo(name: str) -> dict[str, Any]:
    """A careless tenant tool in the Tool Pod: returns one of its secrets, encoded and split in two (it
    declares the secret: a tool body sees only the secrets it names, issue 36)."""
    value = os.environ.get(name, "")
    data = value.encode()
    half = len(value) // 2
    # Careless debugging, printed and logged: the Tool Pod's log must not keep it either.
    print(f"env_echo {name}={value} b64={base64.b64encode(data).decode()}", flush=True)
    logging.getLogger("canary_agent").warning("env_echo %s=%s hex=%s", name, value, data.hex())
    return {
        "b64": base64.b64encode(data).decode(),
        "hex": data.hex(),
        "url": quote(value, safe=""),
        "split": [value[:half], value[half:]],
    }


@app.tool(is_local=True)
def runtime_token_echo() -> dict[str, Any]:
    """A local tool in the AER that returns the Agent's runtime token: the OE must never keep it."""
    token = Path(os.environ["RUNTIME_TOKEN_FILE"]).read_text(encoding="utf-8").strip()
    return {"token": token, "b64": base64.b64encode(token.encode()).decode()}


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    llm = app.llm(ChatCompletionsModel.from_env(os.environ), llm_id="main")

    async def run(task: dict[str, Any]) -> Any:
        if task.get("mode") == "llm":
            messages = [{"type": "human", "content": task["text"]}]
            final = await tool_loop(llm, messages, tools=list(ctx.tools))
            return {"answer": final["content"]}
        results = []
        for name, args in task["calls"]:
            try:
                results.append(await app.call_tool(name, args))
            except Exception as exc:  # a tool failure: the agent keeps its text and goes on
                results.append({"error": type(exc).__name__, "text": str(exc)})
        return {"results": results}

    return run
