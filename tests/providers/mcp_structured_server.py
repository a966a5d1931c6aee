"""A real MCP server built the FastMCP way (the official SDK's `MCPServer`, FastMCP's successor in mcp 2), for
the tests of what a model is sent of a result. Runs in the MCP peer's venv (`mcp_structured_peer.py`).

`python mcp_structured_server.py --port P --mode json|sse`. Like FastMCP, it answers every call of a tool
with an output schema both ways: `structuredContent` and a text block holding the same JSON.

- `forecast` (title "Weather forecast", `_meta`, an output schema from its TypedDict return type);
- `shout` (no output schema: `structured_output=False`), text only;
- `sized` (output schema), a structured result of `size` characters, so a test can send one near the cap;
- `huge_schema` (an output schema over the catalog's bound), whose schema the bundle must leave out.
"""

from __future__ import annotations

import argparse
from typing import Any, TypedDict

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field, create_model


class Forecast(TypedDict):
    city: str
    high_c: int
    sky: str


class Sized(BaseModel):
    payload: str


# Two hundred described fields: a schema of about 60 KiB, over the catalog's 32 KiB bound.
Huge = create_model(  # type: ignore[call-overload]
    "Huge", **{f"field_{i:03d}": (str, Field(default="", description="d" * 250)) for i in range(200)}
)

server = MCPServer("agent-engine-test-structured", version="1.0.0")


@server.tool(title="Weather forecast", meta={"ui": {"icon": "sun"}, "category": "weather"})
def forecast(city: str) -> Forecast:
    """Tomorrow's forecast for a city."""
    return {"city": city, "high_c": 21, "sky": "clear"}


@server.tool(structured_output=False)
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def sized(size: int) -> Sized:
    """A structured result of `size` characters."""
    return Sized(payload="s" * size)


@server.tool()
def huge_schema() -> Huge:  # type: ignore[valid-type]
    """A result whose schema is too big to keep."""
    return Huge()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=("json", "sse"), default="json")
    args = parser.parse_args()
    options: dict[str, Any] = {"host": "127.0.0.1", "port": args.port, "json_response": args.mode == "json"}
    server.settings.log_level = "WARNING"
    server.run("streamable-http", streamable_http_path="/mcp", **options)


if __name__ == "__main__":
    main()
