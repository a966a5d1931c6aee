"""`agent`: a remote A2A agent whose card's skills become tools (issue 38, the client side).

Like `mcp`, the tools are discovered, not declared: the card is fetched when the bundle is built
(`agent_connector`) and the bundle carries one tool per skill, `a2a_<connector>.<skill>`, each sensitive
unless the card tags the skill `read-only` (or `readonly`), so the OE's default policy holds it for
approval. The Tool Pod calls a tool as one blocking A2A `SendMessage` through the official a2a-sdk client
(the card fetched again once per connector lifetime, for its interface), with the `token` credential as
`Authorization: Bearer` (read per call, so a rotated Secret is used at once) and the skill's id in the
message's `metadata.skill`. The answer is the final task's artifacts' text (a data part as JSON), or the
reply message's; a task that ends `input-required`, `auth-required`, `failed`, `rejected` or `canceled` is
a tool error naming the state and the agent's own words.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.types.a2a_pb2 import AgentCard, Message, Part, Role, SendMessageRequest
from google.protobuf import json_format, struct_pb2

from agent_runtime.connectors.builtin._rest import host_port
from agent_runtime.connectors.call_key import current_call, message_id
from agent_runtime.connectors.errors import ToolArgumentError
from agent_runtime.connectors.framework import (
    INVALID_ARGUMENTS,
    BuiltinConnector,
    BuiltinConnectorDefs,
    BuiltinToolError,
    BuiltinToolSpec,
    ConnectorConfigError,
    TestResult,
    apply_defaults,
    validate_value,
)

AGENT_TYPE = "agent"
READ_ONLY_TAGS = frozenset({"read-only", "readonly"})
MAX_DESCRIPTION = 2000
MAX_RESULT_CHARS = 64 * 1024
_SKILL = re.compile(r"^[a-z][a-z0-9_]*$")
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["card_url"],
    "additionalProperties": False,
    "properties": {
        "card_url": {
            "type": "string",
            "pattern": r"^https?://[^\s/?#]+[^\s]*$",
            "maxLength": 2048,
            "description": "the agent card's URL, e.g. https://agent.example.com/.well-known/agent-card.json",
        },
        "timeout_s": {"type": "number", "minimum": 1, "maximum": 600, "default": 120},
    },
}
CREDENTIALS = {"token": "a bearer token sent as Authorization: Bearer (optional)"}
# What a call sends: text, or one JSON value as a data part (an Agent Engine Agent's JSON input).
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "text": {"type": "string", "maxLength": 100_000, "description": "the message to the agent"},
        "data": {"description": "a JSON value sent as a data part instead of text"},
    },
}
# Task states (a2a.types.a2a_pb2.TaskState names) and what they are to the caller.
_FAILED = {
    "TASK_STATE_INPUT_REQUIRED": ("agent_input_required", "the agent asks for more input"),
    "TASK_STATE_AUTH_REQUIRED": ("agent_auth_required", "the agent asks for authorization"),
    "TASK_STATE_FAILED": ("agent_failed", "the agent's task failed"),
    "TASK_STATE_REJECTED": ("agent_rejected", "the agent rejected the task"),
    "TASK_STATE_CANCELED": ("agent_canceled", "the agent's task was canceled"),
}


def tool_prefix(connector: str) -> str:
    """`a2a_<connector>`, lower case, `-` as `_` (a tool's area in the canonical `<area>.<tool>` form)."""
    return "a2a_" + connector.lower().replace("-", "_")


def skill_tools(
    card: Mapping[str, Any], *, connector: str
) -> tuple[list[BuiltinToolSpec], list[tuple[str, str]]]:
    """Pure: the card's (JSON) skills as tools, and the reasons for those skipped (never renamed into a
    clash: a skill id must be lower case letters, digits and `_` once `-`/`.`/spaces are `_`)."""
    tools: list[BuiltinToolSpec] = []
    skipped: list[tuple[str, str]] = []
    seen: set[str] = set()
    for skill in card.get("skills") or []:
        raw = str(skill.get("id") or "")
        short = re.sub(r"[-. ]", "_", raw.lower())
        if not _SKILL.match(short) or len(short) > 48:
            skipped.append((raw[:60], "its id cannot name a tool (a letter first, then [a-z0-9_-])"))
            continue
        if short in seen:
            skipped.append((raw[:60], f"another skill already makes the tool name {short!r}"))
            continue
        seen.add(short)
        tags = {str(t).lower() for t in skill.get("tags") or []}
        about = str(skill.get("description") or skill.get("name") or raw)
        tools.append(
            BuiltinToolSpec(
                name=f"{tool_prefix(connector)}.{short}",
                description=f"{about} (skill {raw} of A2A agent {card.get('name', '')})"[:MAX_DESCRIPTION],
                inputSchema=json.loads(json.dumps(INPUT_SCHEMA)),
                sensitive=not (tags & READ_ONLY_TAGS),
                title=str(skill.get("name") or raw)[:200],
                _meta={"skill": raw},
            )
        )
    return tools, skipped


def materialize_agent(
    *,
    name: str,
    config: Mapping[str, Any],
    credentials: Mapping[str, str],
    card: Mapping[str, Any],
    allow: Sequence[str] | None = None,
) -> BuiltinConnectorDefs:
    """Pure: the bundle file of an `agent` connector from its config and the card (JSON) it fetched."""
    validate_value(CONFIG_SCHEMA, dict(config), where="config", error=ConnectorConfigError)
    tools, _ = skill_tools(card, connector=name)
    if allow is not None and "*" not in allow:
        by_key = {t.name: t for t in tools} | {t.name.split(".", 1)[1]: t for t in tools}
        unknown = [entry for entry in allow if entry not in by_key]
        if unknown:
            raise ConnectorConfigError(
                "expose.allow",
                f"{unknown} name no skill of the card (tools: {', '.join(t.name for t in tools)})",
            )
        chosen = {by_key[entry].name for entry in allow}
        tools = [t for t in tools if t.name in chosen]
    return BuiltinConnectorDefs(
        name=name,
        type=AGENT_TYPE,
        config=apply_defaults(CONFIG_SCHEMA, dict(config)),
        credentials=dict(credentials),
        tools=tools,
    )


def card_record(
    card: Mapping[str, Any],
    *,
    connector: str,
    allow: Sequence[str] | None,
    previous: Mapping[str, Any] | None,
    now: str,
) -> dict[str, Any]:
    """Pure: what the operator records in a Connector's `status.discovery` from the card it fetched (the
    same keys an `mcp` Connector's record has); `catalog` holds the card's skills as the card has them, so
    the bundle is built from the Connector alone. Raises ConnectorConfigError for `expose.allow`."""
    skills = [
        {k: skill[k] for k in ("id", "name", "description", "tags") if k in skill}
        for skill in card.get("skills") or []
        if isinstance(skill, Mapping)
    ]
    defs = materialize_agent(
        name=connector, config={"card_url": "http://x"}, credentials={}, card={"skills": skills}, allow=allow
    )
    _, skipped = skill_tools({"skills": skills}, connector=connector)
    kept = {str((t.meta or {}).get("skill")) for t in defs.tools}
    catalog = [s for s in skills if str(s.get("id")) in kept]
    digest = hashlib.sha256(json.dumps(catalog, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    same = previous is not None and previous.get("digest") == digest
    return {
        "toolCount": len(defs.tools),
        "tools": [t.name for t in defs.tools],
        "digest": digest,
        "discoveredAt": str(previous.get("discoveredAt", now)) if same and previous else now,
        "server": {k: str(card[k]) for k in ("name", "version") if k in card},
        "skipped": [{"tool": t, "reason": r} for t, r in skipped[:50]],
        "catalog": catalog,
    }


def outcome(response: Mapping[str, Any]) -> str:
    """Pure: the text of a SendMessage answer (JSON of a `StreamResponse`): a task's artifacts, else its
    status message, or the reply message. A state that is not `completed` raises BuiltinToolError."""
    if "message" in response:
        return _parts_text(response["message"].get("parts") or [])
    task = response.get("task")
    if not isinstance(task, Mapping):
        raise BuiltinToolError("agent_protocol", "the agent answered neither a task nor a message")
    status = task.get("status") or {}
    state = str(status.get("state") or "")
    said = _parts_text((status.get("message") or {}).get("parts") or [])
    if state in _FAILED:
        category, what = _FAILED[state]
        raise BuiltinToolError(category, f"{what}: {said}" if said else what)
    if state != "TASK_STATE_COMPLETED":
        raise BuiltinToolError(
            "agent_not_finished", f"the agent's task {task.get('id', '')} is still {state or 'unknown'}"
        )
    texts = [_parts_text(a.get("parts") or []) for a in task.get("artifacts") or []]
    return "\n".join(t for t in texts if t) or said


def _parts_text(parts: Sequence[Mapping[str, Any]]) -> str:
    found: list[str] = []
    for part in parts:
        if "text" in part:
            found.append(str(part["text"]))
        elif "data" in part:
            found.append(json.dumps(part["data"], sort_keys=True, ensure_ascii=False))
    text = "\n".join(found)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + " [cut]"


def card_location(card_url: str) -> tuple[str, str]:
    """(base URL, path) for the SDK's card resolver."""
    parts = urlsplit(card_url)
    return f"{parts.scheme}://{parts.netloc}", parts.path or "/"


async def fetch_card(http: httpx.AsyncClient, card_url: str) -> AgentCard:
    """The card through the SDK's resolver; BuiltinToolError (no URL, no token) when it cannot be read."""
    base, path = card_location(card_url)
    try:
        return await A2ACardResolver(http, base, path).get_agent_card()
    except httpx.TimeoutException:
        raise BuiltinToolError("timeout", "the agent card did not arrive in time") from None
    except httpx.TransportError:
        raise BuiltinToolError("connection", "the agent card's host could not be reached") from None
    except Exception as exc:  # the SDK wraps HTTP statuses and bad JSON in its own errors
        status = getattr(exc, "status_code", None)
        category = "auth" if status in (401, 403) else "agent_card"
        raise BuiltinToolError(category, f"the agent card could not be read ({type(exc).__name__})") from None


def card_json(card: AgentCard) -> dict[str, Any]:
    return json_format.MessageToDict(card)


def agent_connector(
    name: str, *, card_url: str, token_env: str | None, env: Mapping[str, str], timeout_s: float = 30
) -> BuiltinConnectorDefs:
    """Fetch the card now and materialize the connector (building a bundle, as `mcp_servers` does)."""
    token = env.get(token_env or "", "") if token_env else ""

    async def fetch() -> AgentCard:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(headers=headers, timeout=timeout_s) as http:
            return await fetch_card(http, card_url)

    card = asyncio.run(fetch())
    return materialize_agent(
        name=name,
        config={"card_url": card_url},
        credentials={"token": token_env} if token_env else {},
        card=card_json(card),
    )


class AgentConnector(BuiltinConnector):
    type = AGENT_TYPE
    description = (
        "A remote A2A agent (its agent card's URL). Each skill of the card is a tool "
        "a2a_<connector>.<skill>, "
        "sensitive unless the card tags it read-only; a call is one A2A SendMessage."
    )
    config_schema = CONFIG_SCHEMA
    secrets = CREDENTIALS
    tools = ()  # discovered: the bundle file lists them
    discovered_tools = True

    def __init__(
        self, config: Mapping[str, Any], *, tools: Sequence[BuiltinToolSpec] = (), **kwargs: Any
    ) -> None:
        super().__init__(config, **kwargs)
        self.skills = {t.name: str((t.meta or {}).get("skill") or t.name.split(".", 1)[1]) for t in tools}
        self.http = httpx.AsyncClient(timeout=float(self.config["timeout_s"]))
        self._card: AgentCard | None = None
        self._lock = asyncio.Lock()

    def _headers(self, env: Mapping[str, str]) -> dict[str, str]:
        token = self.secret("token", env, required=False) if self.credentials else None
        return {"authorization": f"Bearer {token}"} if token else {}

    async def _client(self, env: Mapping[str, str]) -> Client:
        async with self._lock:
            if self._card is None:
                self.http.headers.update(self._headers(env))
                self._card = await fetch_card(self.http, self.config["card_url"])
        self.http.headers.update(self._headers(env))  # a rotated Secret, at once
        return ClientFactory(ClientConfig(streaming=False, httpx_client=self.http)).create(self._card)

    async def execute(self, tool: str, arguments: Mapping[str, Any], *, env: Mapping[str, str]) -> Any:
        skill = self.skills.get(tool)
        if skill is None:
            raise BuiltinToolError(INVALID_ARGUMENTS, f"connector {self.name} has no tool {tool!r}")
        validate_value(INPUT_SCHEMA, arguments, where="arguments", error=ToolArgumentError)
        if ("text" in arguments) == ("data" in arguments):
            raise BuiltinToolError(INVALID_ARGUMENTS, "arguments: give exactly one of text or data")
        part = Part(text=str(arguments["text"])) if "text" in arguments else _data_part(arguments["data"])
        # The same id every time this (execution, step) is sent (a resend after a crash): a remote that
        # dedupes on it (the OE's own A2A server does) answers the first task again.
        message = Message(message_id=message_id(current_call()), role=Role.ROLE_USER, parts=[part])
        message.metadata.update({"skill": skill})
        client = await self._client(env)
        try:
            answers = [
                json_format.MessageToDict(a)
                async for a in client.send_message(SendMessageRequest(message=message))
            ]
        except httpx.TimeoutException:
            raise BuiltinToolError("timeout", "the agent did not answer in time") from None
        except httpx.TransportError:
            raise BuiltinToolError("connection", "the agent could not be reached") from None
        except A2AClientError as exc:
            raise BuiltinToolError("agent_protocol", _client_error(exc)) from None
        if not answers:
            raise BuiltinToolError("agent_protocol", "the agent sent no answer")
        return outcome(answers[-1])

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        try:
            async with httpx.AsyncClient(headers=self._headers(env or {}), timeout=30) as http:
                card = card_json(await fetch_card(http, self.config["card_url"]))
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        tools, skipped = skill_tools(card, connector=self.name)
        why = "; ".join(f"{t}: {r}" for t, r in skipped)
        return TestResult(
            ok=True,
            detail=f"{len(tools)} skills as tools" + (f"; skipped: {why}" if skipped else ""),
            discovered_tools=[t.name for t in tools],
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        return [host_port(config["card_url"])]


def _data_part(value: Any) -> Part:
    part = Part(media_type="application/json")
    part.data.CopyFrom(json_format.ParseDict(value, struct_pb2.Value()))
    return part


def _client_error(exc: Exception) -> str:
    """The SDK's error, by kind and JSON-RPC code only: its text may quote the request."""
    code = getattr(exc, "code", None)
    return f"the agent refused the request ({type(exc).__name__}{f', code {code}' if code else ''})"
