"""`agentengine dev` on an agent whose code uses `app.memory`: the Memory server runs too (found in the code,
no flag), on SQLite in the dev loop's directory, and the agent writes and finds a record through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.devloop.children import free_port
from tests.integration.devloop.session import DevSession

pytestmark = pytest.mark.integration

AGENT = """
from typing import Any

from agent_runtime.sdk import App, RequestContext

app = App("mem-agent")


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    async def run(task: Any) -> dict[str, Any]:
        await app.memory.write(task["text"], namespace="notes")
        hits = await app.memory.search(task["text"], namespace="notes", top_k=1)
        return {"found": [hit.content for hit in hits]}

    return run
"""


def test_an_agent_that_uses_memory_gets_the_memory_server(tmp_path: Path) -> None:
    directory = tmp_path / "mem-agent"
    (directory / "mem_agent").mkdir(parents=True)
    (directory / "agent.yaml").write_text("version: 1\nconnectors: []\n")
    (directory / "mem_agent" / "__init__.py").write_text("")
    (directory / "mem_agent" / "agent.py").write_text(AGENT)
    session = DevSession.start(directory, "--entrypoint", "mem_agent.agent:app", port=free_port())
    try:
        assert "  Memory " in session.banner
        assert "memory" in session.components()
        with session.client() as client:
            execution_id = client.invoke(agent=session.agent, input={"text": "prefers window seats"})[
                "execution_id"
            ]
        view = session.wait(execution_id, "completed", "failed")
        assert view["status"] == "completed", view
        assert view["result"] == {"found": ["prefers window seats"]}
        assert (session.workdir / "memory.sqlite3").is_file()
    finally:
        session.close()
    assert not session.workdir.exists()
