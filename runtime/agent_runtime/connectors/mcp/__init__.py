"""MCP servers as connectors (Decision 18): one Streamable HTTP client, the tool catalog a discovery yields,
and `agent.yaml` `mcp.servers` materialized into the bundle like any connector."""
