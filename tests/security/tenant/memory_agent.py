"""A tenant whose Tool Pod tools use the Agent's Memory (on PYTHONPATH as `memory_agent`).

`remember` and `recall` read and write the run's own user's memory (the MemoryClient presents the
statement the OE sent with the call); `recall_of` names another user, which the Memory server must refuse.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.sdk import App, RequestContext
from agent_runtime.sdk.memory import MemoryClient, MemoryRequestError

app = App("memory-agent")


async def _with_client(action: Any) -> Any:
    client = MemoryClient.from_env()
    try:
        return await action(client)
    except MemoryRequestError as exc:
        return {"refused": exc.status, "error": exc.error}
    finally:
        await client.aclose()


@app.tool
async def remember(text: str) -> dict[str, Any]:
    """Write a fact to the run's user's memory."""

    async def write(client: MemoryClient) -> dict[str, Any]:
        record = await client.write(text, namespace="prefs", embed=False)
        return {"user_id": record.user_id}

    return dict(await _with_client(write))


@app.tool
async def recall() -> dict[str, Any]:
    """The run's user's facts."""

    async def read(client: MemoryClient) -> dict[str, Any]:
        return {"facts": [hit.content for hit in await client.search(namespace="prefs")]}

    return dict(await _with_client(read))


@app.tool
async def recall_of(user_id: str) -> dict[str, Any]:
    """Another user's facts (the attack)."""

    async def read(client: MemoryClient) -> dict[str, Any]:
        return {"facts": [hit.content for hit in await client.search(namespace="prefs", user_id=user_id)]}

    return dict(await _with_client(read))


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    async def run(task: dict[str, Any]) -> Any:
        return {"results": [await app.call_tool(name, args) for name, args in task["calls"]]}

    return run
