"""`notion`: the Notion API (`notion.search`, `notion.query_database`, `notion.create_page`,
`notion.append_block`). Errors are `{"object": "error", "status", "code", "message"}`; a 429 (`code:
rate_limited`) carries Retry-After. `query_database` is a POST that only reads, so it is not sensitive."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_runtime.connectors.builtin._rest import (
    RestClient,
    base_url_schema,
    bearer,
    clean_segment,
    host_port,
    json_of,
)
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError, TestResult, tool

NOTION_VERSION = "2022-06-28"
_ID = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"^[A-Za-z0-9-]+$"}
_OBJECT = {"type": "object"}
_BLOCKS = {"type": "array", "items": _OBJECT, "maxItems": 100, "description": "Notion block objects"}


class NotionConnector(BuiltinConnector):
    type = "notion"
    description = "Notion pages and databases: search, query, create pages, append blocks."
    config_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "base_url": base_url_schema("https://api.notion.com/v1", "API root"),
            "notion_version": {"type": "string", "default": NOTION_VERSION},
        },
    }
    secrets = {"token": "an internal integration token (secret_... or ntn_...)"}
    required_secrets = frozenset({"token"})
    tools = (
        tool(
            "notion.search",
            "Search pages and databases shared with the integration by title.",
            properties={
                "query": {"type": "string", "maxLength": 1000},
                "filter": {"type": "string", "enum": ["page", "database"]},
                "page_size": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                "start_cursor": {"type": "string"},
            },
            sensitive=False,
        ),
        tool(
            "notion.query_database",
            "Query a database's pages with an optional Notion filter and sorts.",
            properties={
                "database_id": _ID,
                "filter": _OBJECT,
                "sorts": {"type": "array", "items": _OBJECT},
                "page_size": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                "start_cursor": {"type": "string"},
            },
            required=["database_id"],
            sensitive=False,
        ),
        tool(
            "notion.create_page",
            "Create a page in a database (parent_database_id) or under a page (parent_page_id). "
            "Needs approval.",
            properties={
                "parent_database_id": _ID,
                "parent_page_id": _ID,
                "properties": _OBJECT,
                "children": _BLOCKS,
            },
            required=["properties"],
            sensitive=True,
        ),
        tool(
            "notion.append_block",
            "Append blocks to a page or block. Needs approval.",
            properties={"block_id": _ID, "children": {**_BLOCKS, "minItems": 1}},
            required=["block_id", "children"],
            sensitive=True,
        ),
    )

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._rest = RestClient(provider="Notion")

    async def _api(
        self, method: str, path: str, env: Mapping[str, str], *, read: bool, body: Any = None
    ) -> Any:
        token = self.secret("token", env)
        headers = {**bearer(token), "Notion-Version": self.config["notion_version"]}
        response = await self._rest.request(
            method,
            f"{self.config['base_url'].rstrip('/')}{path}",
            headers=headers,
            json_body=body,
            read=read,
            secrets=[token or ""],
        )
        return json_of(response, "Notion")

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        if tool == "notion.search":
            body: dict[str, Any] = {"page_size": arguments["page_size"]}
            if arguments.get("query"):
                body["query"] = arguments["query"]
            if arguments.get("filter"):
                body["filter"] = {"property": "object", "value": arguments["filter"]}
            if arguments.get("start_cursor"):
                body["start_cursor"] = arguments["start_cursor"]
            return _listing(await self._api("POST", "/search", env, read=True, body=body))
        if tool == "notion.query_database":
            database = clean_segment(arguments["database_id"], "database_id")
            body = {
                k: arguments[k] for k in ("filter", "sorts", "page_size", "start_cursor") if k in arguments
            }
            return _listing(
                await self._api("POST", f"/databases/{database}/query", env, read=True, body=body)
            )
        if tool == "notion.create_page":
            if bool(arguments.get("parent_database_id")) == bool(arguments.get("parent_page_id")):
                raise BuiltinToolError(
                    "invalid_arguments", "give exactly one of parent_database_id or parent_page_id"
                )
            parent = (
                {"database_id": arguments["parent_database_id"]}
                if arguments.get("parent_database_id")
                else {"page_id": arguments["parent_page_id"]}
            )
            body = {"parent": parent, "properties": arguments["properties"]}
            if arguments.get("children"):
                body["children"] = arguments["children"]
            page = await self._api("POST", "/pages", env, read=False, body=body)
            return {"id": page.get("id"), "url": page.get("url"), "created_time": page.get("created_time")}
        block = clean_segment(arguments["block_id"], "block_id")
        result = await self._api(
            "PATCH", f"/blocks/{block}/children", env, read=False, body={"children": arguments["children"]}
        )
        return {"appended": len(result.get("results") or []), "block_id": block}

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        try:
            data = await self._api("GET", "/users/me", env or self._env, read=True)
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        return TestResult(ok=True, detail=f"authenticated as {data.get('name') or data.get('id', '?')}")

    async def aclose(self) -> None:
        await self._rest.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        return [host_port(config.get("base_url") or "https://api.notion.com/v1")]


def _listing(data: dict[str, Any]) -> dict[str, Any]:
    results = []
    for item in data.get("results") or []:
        if not isinstance(item, dict):
            continue
        results.append(
            {
                "object": item.get("object"),
                "id": item.get("id"),
                "url": item.get("url"),
                "title": _title(item),
                "properties": item.get("properties") if item.get("object") == "page" else None,
                "last_edited_time": item.get("last_edited_time"),
            }
        )
    return {
        "results": results,
        "has_more": bool(data.get("has_more")),
        "next_cursor": data.get("next_cursor"),
    }


def _title(item: dict[str, Any]) -> str:
    """A page's or database's title as plain text (Notion keeps it in rich-text arrays)."""
    parts = item.get("title") if isinstance(item.get("title"), list) else None
    if parts is None:
        for prop in (item.get("properties") or {}).values():
            if isinstance(prop, dict) and isinstance(prop.get("title"), list):
                parts = prop.get("title")
                break
    return "".join(p.get("plain_text", "") for p in parts or [] if isinstance(p, dict))
