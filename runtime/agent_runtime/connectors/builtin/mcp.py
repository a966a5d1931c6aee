"""`mcp`: a remote MCP server (Streamable HTTP) whose tools are discovered, not declared (C-08).

The operator discovers a Connector's tools at reconcile time (an `agent.yaml` server's when the bundle is
built) and the bundle carries them as `mcp.<id8>.<tool>`, each sensitive unless the server marked it
`readOnlyHint: true`; so a run never asks the server for its tools. The Tool Pod calls a tool with the
server's own name through one MCP session per connector, with the bearer token from the `token`
credential (read per call, so a rotated Secret is used at once). A tool whose bundle entry declares an
`outputSchema` answers the model with its result's `structuredContent`, any other with its content
(`connectors/mcp/result.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_runtime.connectors.builtin._rest import host_port
from agent_runtime.connectors.framework import (
    INVALID_ARGUMENTS,
    BuiltinConnector,
    BuiltinToolError,
    BuiltinToolSpec,
    TestResult,
    ToolSchema,
)
from agent_runtime.connectors.mcp.authorization import McpAuthorization, oauth_egress
from agent_runtime.connectors.mcp.catalog import CONFIG_SCHEMA, CREDENTIALS, MCP_TYPE, original_name, usable
from agent_runtime.connectors.mcp.client import McpClient
from agent_runtime.connectors.transport import tls_context


class McpConnector(BuiltinConnector):
    type = MCP_TYPE
    description = (
        "A remote MCP server (Streamable HTTP). Its tools are discovered from the server and named "
        "mcp.<id8>.<tool>; each is sensitive unless the server marks it readOnlyHint."
    )
    config_schema = CONFIG_SCHEMA
    secrets = CREDENTIALS
    tools = ()  # discovered: the bundle file lists them
    discovered_tools = True

    def __init__(
        self, config: Mapping[str, Any], *, tools: Sequence[BuiltinToolSpec] = (), **kwargs: Any
    ) -> None:
        super().__init__(config, **kwargs)
        # The server's names of the tools that declare an output schema (their results: structuredContent).
        self.structured = frozenset(original_name(t.name) for t in tools if t.output_schema is not None)
        tls = tls_context(None, env={}, connector=self.name)
        self.client = McpClient(
            self.config["url"],
            timeout_s=float(self.config["timeout_s"]),
            ssl_context=tls,
            provider=f"MCP server of connector {self.name}",
        )
        self.authorization = McpAuthorization(name=self.name, config=self.config, ssl_context=tls)

    async def execute(self, tool: str, arguments: Mapping[str, Any], *, env: Mapping[str, str]) -> Any:
        """Call the server's own tool; the server checks the arguments against its schema."""
        prefix = f"mcp.{self.config.get('server_id', '')}."
        if not tool.startswith(prefix):
            raise BuiltinToolError(INVALID_ARGUMENTS, f"connector {self.name} has no tool {tool!r}")
        if not isinstance(arguments, Mapping):
            raise BuiltinToolError(INVALID_ARGUMENTS, "arguments must be a JSON object")
        name = original_name(tool)
        return await self.authorization.call(
            self,
            env,
            lambda token: self.client.call_tool(
                name, arguments, token=token, declares_output=name in self.structured
            ),
        )

    async def discover(self, *, env: Mapping[str, str]) -> list[ToolSchema]:
        """The server's tools now, as this connector would name them (for `test_connection`)."""
        found = await self.authorization.call(self, env, self._list_once)
        kept, _ = usable(found.tools, id8=self.config.get("server_id") or "00000000")
        return [
            ToolSchema(
                name=f"mcp.{self.config.get('server_id') or '00000000'}.{t.name}",
                description=t.description,
                inputSchema=t.input_schema,
                sensitive=t.sensitive,
            )
            for t in kept
        ]

    async def _list_once(self, token: str | None) -> Any:
        found = await self.client.list_tools(token=token)
        await self.client.close_session(token=token)
        return found

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        try:
            tools = await self.discover(env=env or {})
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        return TestResult(
            ok=True, detail=f"{len(tools)} tools discovered", discovered_tools=[t.name for t in tools]
        )

    async def aclose(self) -> None:
        await self.client.close_session()
        await self.client.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        return [host_port(config["url"]), *oauth_egress(config)]
