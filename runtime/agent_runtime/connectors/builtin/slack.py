"""`slack`: the Slack Web API with a bot token (`slack.post_message`, `slack.list_channels`,
`slack.reply_thread`). Slack answers most errors as HTTP 200 `{"ok": false, "error": "<code>"}`; each code
is mapped to a category here. A 429 carries Retry-After (seconds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from agent_runtime.connectors.builtin._rest import RestClient, base_url_schema, bearer, host_port, json_of
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError, TestResult, tool

_CATEGORIES = {
    "not_authed": "auth",
    "invalid_auth": "auth",
    "account_inactive": "auth",
    "token_revoked": "auth",
    "token_expired": "auth",
    "missing_scope": "forbidden",
    "not_in_channel": "forbidden",
    "restricted_action": "forbidden",
    "is_archived": "forbidden",
    "channel_not_found": "not_found",
    "thread_not_found": "not_found",
    "message_not_found": "not_found",
    "ratelimited": "rate_limited",
    "rate_limited": "rate_limited",
}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 40_000}
_CHANNEL = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "channel id (C0123...) or name",
}


class SlackConnector(BuiltinConnector):
    type = "slack"
    description = "Slack Web API with a bot token: post messages, reply in threads, list channels."
    config_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "base_url": base_url_schema("https://slack.com/api", "the Web API root"),
            "default_channel": {"type": "string", "maxLength": 200},
        },
    }
    secrets = {"token": "the bot token (xoxb-...)"}
    required_secrets = frozenset({"token"})
    tools = (
        tool(
            "slack.post_message",
            "Post a message to a Slack channel (chat.postMessage). Needs approval.",
            properties={"channel": _CHANNEL, "text": _TEXT},
            required=["text"],
            sensitive=True,
        ),
        tool(
            "slack.reply_thread",
            "Reply in a thread under the message whose ts is thread_ts. Needs approval.",
            properties={"channel": _CHANNEL, "thread_ts": {"type": "string", "minLength": 1}, "text": _TEXT},
            required=["thread_ts", "text"],
            sensitive=True,
        ),
        tool(
            "slack.list_channels",
            "List channels the bot can see: id, name, is_private, topic; follow next_cursor for more.",
            properties={
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
                "cursor": {"type": "string"},
                "types": {"type": "string", "default": "public_channel,private_channel"},
            },
            sensitive=False,
        ),
    )

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._rest = RestClient(provider="Slack")

    def _url(self, method: str) -> str:
        return f"{self.config['base_url'].rstrip('/')}/{method}"

    async def _api(self, method: str, env: Mapping[str, str], *, read: bool, **kwargs: Any) -> dict[str, Any]:
        token = self.secret("token", env)
        response = await self._rest.request(
            "GET" if read else "POST",
            self._url(method),
            headers=bearer(token),
            read=read,
            secrets=[token or ""],
            check=_check_ok,
            **kwargs,
        )
        return json_of(response, "Slack")

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        if tool == "slack.list_channels":
            params = {"limit": arguments["limit"], "types": arguments["types"], "exclude_archived": "true"}
            if arguments.get("cursor"):
                params["cursor"] = arguments["cursor"]
            data = await self._api("conversations.list", env, read=True, params=params)
            return {
                "channels": [
                    {
                        "id": c.get("id"),
                        "name": c.get("name"),
                        "is_private": c.get("is_private", False),
                        "topic": (c.get("topic") or {}).get("value", ""),
                    }
                    for c in data.get("channels", [])
                ],
                "next_cursor": (data.get("response_metadata") or {}).get("next_cursor") or None,
            }
        channel = arguments.get("channel") or self.config.get("default_channel")
        if not channel:
            raise BuiltinToolError(
                "invalid_arguments", "channel is required (this connector has no default_channel)"
            )
        body = {"channel": channel, "text": arguments["text"]}
        if tool == "slack.reply_thread":
            body["thread_ts"] = arguments["thread_ts"]
        data = await self._api("chat.postMessage", env, read=False, json_body=body)
        return {"channel": data.get("channel"), "ts": data.get("ts"), "thread_ts": body.get("thread_ts")}

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        try:
            data = await self._api("auth.test", env or self._env, read=False, json_body={})
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        return TestResult(ok=True, detail=f"authenticated to team {data.get('team', '?')}")

    async def aclose(self) -> None:
        await self._rest.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        return [host_port(config.get("base_url") or "https://slack.com/api")]


def _check_ok(response: httpx.Response) -> None:
    data = json_of(response, "Slack")
    if isinstance(data, dict) and data.get("ok") is True:
        return
    code = str(data.get("error", "unknown_error")) if isinstance(data, dict) else "unknown_error"
    code = "".join(ch for ch in code if ch.isalnum() or ch == "_")[:80]
    category = _CATEGORIES.get(code, "client_error")
    retry = response.headers.get("retry-after", "")
    raise BuiltinToolError(
        category,
        f"Slack refused the call: {code}",
        status_code=response.status_code,
        retry_after_s=float(retry) if retry.isdigit() else None,
    )
