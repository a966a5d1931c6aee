"""A real MCP server (Streamable HTTP) for the MCP connector's tests, built on the official `mcp` SDK.

It runs in its own virtual environment (`tests/providers/mcp_peer.py` makes it), not in ours: the SDK is a
test peer, not a dependency. `python mcp_server.py --port P --mode json|sse --token T --page-size N`.

What it offers, so tests can check each rule:

- tools with `annotations.readOnlyHint` true (`lookup`, `echo`), false (`delete_item`) and absent (`note`);
  `lookup` declares an output schema and answers both ways (text and `structuredContent`), as does
  `echo_auth` without one;
  `fail` answers a tool error (`isError: true`), `explode` raises (a JSON-RPC error), `slow` sleeps,
  `big` answers more text than the connector passes on, `whoami` tells the call's session;
- filler tools (`filler_00`...) so `tools/list` spans several pages of `--page-size` tools;
- `POST /control/generation {"generation": 2}` changes the tool list (`note` goes, `added_later` comes);
- `GET /control/stats` counts JSON-RPC methods, tool calls and refused requests;
- `--echo-auth`: `echo_auth` quotes the Authorization header in its results, and in its title and
  `_meta` when listed;
- a bearer token (`--token`): any request without it is a 401 that quotes what it was sent (as careless
  servers do), so tests prove the client never repeats an error body whole.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
from collections import Counter
from typing import Any
from urllib.parse import quote, quote_plus

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

STATE: dict[str, Any] = {
    "generation": 1,
    "methods": Counter(),
    "calls": Counter(),
    "refused": 0,
    "sessions": set(),
    "echo_auth": False,  # --echo-auth: offer echo_auth and echo_auth_fail (the canary scan's careless tools)
}
OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}
ITEM = {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}}


def _tool(
    name: str,
    description: str,
    *,
    read_only: bool | None,
    schema: dict[str, Any] | None = None,
    output: dict[str, Any] | None = None,
) -> Any:
    annotations = None if read_only is None else types.ToolAnnotations(read_only_hint=read_only)
    return types.Tool(
        name=name,
        description=description,
        input_schema=schema or OBJECT,
        annotations=annotations,
        output_schema=output,
    )


def tools(generation: int, fillers: int) -> list[Any]:
    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    listed = [
        _tool("lookup", "Look an item up by id.", read_only=True,
              schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
              output=ITEM),
        _tool("echo", "Echo the text back.", read_only=True, schema=text),
        _tool("delete_item", "Delete an item by id.", read_only=False,
              schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
        _tool("note", "Write a note.", read_only=None, schema=text),
        _tool("fail", "Always fails as a tool.", read_only=True),
        _tool("explode", "Raises inside the server.", read_only=True),
        _tool("slow", "Sleeps for `seconds`.", read_only=True,
              schema={"type": "object", "properties": {"seconds": {"type": "number"}}}),
        _tool("big", "Answers `size` characters.", read_only=True,
              schema={"type": "object", "properties": {"size": {"type": "integer"}}}),
        _tool("whoami", "Tells the call's MCP session.", read_only=True),
    ]  # fmt: skip
    if STATE["echo_auth"]:
        listed += [
            _tool("echo_auth", "Quotes the call's Authorization header, in every encoding.", read_only=True),
            _tool("echo_auth_fail", "Fails quoting the Authorization header.", read_only=True),
        ]
    if generation >= 2:
        listed = [t for t in listed if t.name != "note"]
        listed.append(_tool("added_later", "Came with generation 2.", read_only=True))
    listed += [_tool(f"filler_{i:02d}", f"Filler tool {i}.", read_only=True) for i in range(fillers)]
    return listed


def build(*, page_size: int, fillers: int) -> Server:
    async def list_tools(ctx: Any, params: Any) -> Any:
        STATE["methods"]["tools/list"] += 1
        everything = tools(STATE["generation"], fillers)
        if STATE["echo_auth"]:
            # A careless server: echo_auth's title and _meta quote the listing's Authorization header.
            request = getattr(ctx, "request", None)
            sent = request.headers.get("authorization", "") if request is not None else ""
            quoted = {
                "raw": sent,
                "base64": base64.b64encode(sent.encode()).decode(),
                "hex": sent.encode().hex(),
            }
            everything = [
                t.model_copy(update={"title": f"auth {sent}", "meta": {"auth": quoted}})
                if t.name == "echo_auth"
                else t
                for t in everything
            ]
        start = int(params.cursor) if params is not None and params.cursor else 0
        if start < 0 or start > len(everything):
            raise MCPError(code=-32602, message="Invalid cursor")
        page = everything[start : start + page_size]
        following = start + page_size
        return types.ListToolsResult(
            tools=page, next_cursor=str(following) if following < len(everything) else None
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        STATE["methods"]["tools/call"] += 1
        name, arguments = params.name, params.arguments or {}
        STATE["calls"][name] += 1
        known = {t.name for t in tools(STATE["generation"], fillers)}
        if name not in known:
            raise MCPError(code=-32602, message=f"Unknown tool: {name}")
        if name == "fail":
            return types.CallToolResult(content=[types.TextContent(text="the item is locked")], is_error=True)
        if name == "explode":
            raise RuntimeError("exploded inside the tool")
        if name == "slow":
            await asyncio.sleep(float(arguments.get("seconds", 1)))
            return types.CallToolResult(content=[types.TextContent(text="slept")])
        if name == "big":
            return types.CallToolResult(
                content=[types.TextContent(text="x" * int(arguments.get("size", 10)))]
            )
        if name == "whoami":
            request = getattr(ctx, "request", None)
            session = request.headers.get("mcp-session-id", "") if request is not None else ""
            return types.CallToolResult(content=[types.TextContent(text=str(session))])
        if name in ("echo_auth", "echo_auth_fail"):
            request = getattr(ctx, "request", None)
            sent = request.headers.get("authorization", "") if request is not None else ""
            raw = sent.encode()
            forms = {"raw": sent, "base64": base64.b64encode(raw).decode(), "hex": raw.hex(),
                     "url": quote(sent, safe=""), "form": quote_plus(sent)}  # fmt: skip
            text = json.dumps(forms)
            if name == "echo_auth_fail":
                return types.CallToolResult(content=[types.TextContent(text=f"bad {text}")], is_error=True)
            return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=forms)
        if name == "lookup":
            item = {"id": arguments.get("id"), "name": f"item {arguments.get('id')}"}
            return types.CallToolResult(
                content=[types.TextContent(text=json.dumps(item))], structured_content=item
            )
        text = str(arguments.get("text", arguments.get("id", "")))
        return types.CallToolResult(content=[types.TextContent(text=f"{name}: {text}")])

    return Server("agent-engine-test-mcp", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


class Gate:
    """ASGI middleware: the bearer token check, and counting every JSON-RPC method the client sends."""

    def __init__(self, app: Any, *, token: str, path: str) -> None:
        self.app = app
        self.token = token
        self.path = path

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.path):
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if self.token and headers.get("authorization") != f"Bearer {self.token}":
            STATE["refused"] += 1
            sent = headers.get("authorization", "")
            body = json.dumps({"error": "invalid_token", "error_description": f"token {sent!r} is not valid"})
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"www-authenticate", b'Bearer error="invalid_token"')]})  # fmt: skip
            await send({"type": "http.response.body", "body": body.encode()})
            return
        if session := headers.get("mcp-session-id"):
            STATE["sessions"].add(session)
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        raw = b"".join(chunks)
        with contextlib.suppress(ValueError):
            payload = json.loads(raw or b"null")
            for item in payload if isinstance(payload, list) else [payload]:
                if isinstance(item, dict) and item.get("method") in (
                    "initialize",
                    "notifications/initialized",
                ):
                    STATE["methods"][item["method"]] += 1
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def control_generation(request: Request) -> JSONResponse:
    STATE["generation"] = int((await request.json())["generation"])
    return JSONResponse({"generation": STATE["generation"]})


async def control_stats(request: Request) -> JSONResponse:
    return JSONResponse(
        {
            "generation": STATE["generation"],
            "methods": dict(STATE["methods"]),
            "calls": dict(STATE["calls"]),
            "refused": STATE["refused"],
            "sessions": len(STATE["sessions"]),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=("json", "sse"), default="json")
    parser.add_argument("--token", default="")
    parser.add_argument("--page-size", type=int, default=4)
    parser.add_argument("--fillers", type=int, default=3)
    parser.add_argument("--echo-auth", action="store_true")
    args = parser.parse_args()
    STATE["echo_auth"] = args.echo_auth
    server = build(page_size=args.page_size, fillers=args.fillers)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=args.mode == "json",
        custom_starlette_routes=[
            Route("/control/generation", control_generation, methods=["POST"]),
            Route("/control/stats", control_stats, methods=["GET"]),
        ],
    )
    uvicorn.run(
        Gate(app, token=args.token, path="/mcp"), host="127.0.0.1", port=args.port, log_level="warning"
    )


if __name__ == "__main__":
    main()
