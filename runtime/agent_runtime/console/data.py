"""The console's own JSON reads, beyond the client API: who is signed in and what they may do, the inbox
across namespaces, the Agents of a namespace and their tools' input schemas.

Each answer is filtered by the caller's own rights through `ClientAuth`, as the client API's lists are:
the inbox holds the held calls of namespaces where the caller may approve (`create agents/approve`), the
others only namespaces the caller may read (`get agents/executions`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from typing import Any, Protocol

from agent_runtime.oe.client_auth import (
    APPROVE,
    CANCEL,
    INTERRUPT,
    INVOKE,
    READ,
    Caller,
    ClientAuth,
    Permission,
    on_agents,
)
from agent_runtime.oe.engine import Orchestrator, review_view
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.store.base import Identity
from agent_runtime.oe.store.codec import encode_cursor
from agent_runtime.oe.views import client_view
from agent_runtime.protocol import ExecutionState

RIGHTS: tuple[tuple[str, Permission], ...] = (
    ("read", READ),
    ("approve", APPROVE),
    ("cancel", CANCEL),
    ("interrupt", INTERRUPT),
    ("invoke", INVOKE),
)


# Filtering by who invoked is not an index read: at most this many executions are read per answer.
SCAN_LIMIT = 5_000
SCAN_PAGE = 200


class Registrations(Protocol):
    @property
    def agents(self) -> Collection[str]: ...

    def get(self, agent: str) -> AgentRegistration | None: ...


class BadQuery(ValueError):
    """A query parameter the console cannot use: 400 naming the field and the fix."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class ConsoleData:
    """The reads the pages need that the client API has no route for."""

    def __init__(
        self, *, engine: Orchestrator, auth: ClientAuth, namespaces: Callable[[], Collection[str]]
    ) -> None:
        self.engine = engine
        self.auth = auth
        self.namespaces = namespaces

    def _registry(self) -> Registrations | None:
        registry = self.engine.registry
        return registry if hasattr(registry, "agents") else None  # type: ignore[return-value]

    async def me(self, caller: Caller) -> dict[str, Any]:
        """The signed-in identity and, per namespace it may read, each right the pages ask about."""
        names = sorted(set(self.namespaces()))

        async def rights(namespace: str) -> dict[str, Any]:
            answers = await asyncio.gather(
                *(self.auth.allowed(caller, on_agents(permission, namespace)) for _, permission in RIGHTS)
            )
            return {"name": namespace, **{key: ok for (key, _), ok in zip(RIGHTS, answers, strict=True)}}

        listed = await asyncio.gather(*(rights(ns) for ns in names))
        registry = self._registry()
        agents = sorted(registry.agents) if registry is not None else []
        readable = {entry["name"] for entry in listed if entry["read"]}
        return {
            "username": caller.identity.username,
            "groups": list(caller.identity.groups),
            "static": caller.static,
            "namespaces": [entry for entry in listed if entry["read"]],
            "agents": [agent for agent in agents if agent.split("/", 1)[0] in readable],
        }

    async def inbox(
        self,
        caller: Caller,
        *,
        namespace: str | None,
        agent: str | None,
        limit: int,
        cursor: str | None,
    ) -> dict[str, Any]:
        """Held calls the caller may decide, newest first (the namespace and Agent filters narrow it)."""
        if agent is not None:
            if "/" not in agent:
                raise BadQuery("agent", "name the Agent as <namespace>/<name>")
            if namespace is not None and agent.split("/", 1)[0] != namespace:
                raise BadQuery("agent", "the Agent is not in the namespace the filter names")
            candidates: set[str] = {agent.split("/", 1)[0]}
        elif namespace is not None:
            candidates = {namespace}
        else:
            candidates = set(self.namespaces())
        deciding = await self.auth.readable(caller, candidates, permission=APPROVE)
        filtered = namespace is not None or agent is not None
        # None: the caller may approve cluster-wide (then a filter still narrows to its namespace).
        project_ids = (frozenset(candidates) if filtered else None) if deciding is None else deciding
        try:
            page = await self.engine.store.list_executions(
                agent=agent,
                project_ids=project_ids,
                status=ExecutionState.SUSPENDED,
                limit=limit,
                cursor=cursor,
            )
        except ValueError:
            raise BadQuery("cursor", "not a cursor this list returned; send next_cursor as given") from None
        return {"items": [review_view(item) for item in page.items], "next_cursor": page.next_cursor}

    async def executions(
        self,
        caller: Caller,
        *,
        agent: str | None,
        status: ExecutionState | None,
        invoked_by: str,
        limit: int,
        cursor: str | None,
    ) -> dict[str, Any]:
        """The executions list filtered by who invoked them, newest first, across the whole list: pages of
        the store are read until `limit` match or `SCAN_LIMIT` were read (then `next_cursor` goes on from
        the last one read, so "Load more" continues the search)."""
        if agent is not None and "/" not in agent:
            raise BadQuery("agent", "name the Agent as <namespace>/<name>")
        candidates = {agent.split("/", 1)[0]} if agent is not None else set(self.namespaces())
        readable = await self.auth.readable(caller, candidates)
        matched: list[dict[str, Any]] = []
        scanned = 0
        while True:
            try:
                page = await self.engine.store.list_executions(
                    agent=agent, project_ids=readable, status=status, limit=SCAN_PAGE, cursor=cursor
                )
            except ValueError:
                raise BadQuery(
                    "cursor", "not a cursor this list returned; send next_cursor as given"
                ) from None
            for record in page.items:
                scanned += 1
                cursor = encode_cursor(record.created_at, record.execution_id)
                if invoked_by_matches(record.invoked_by, invoked_by):
                    matched.append(client_view(record))
                if len(matched) >= limit or scanned >= SCAN_LIMIT:
                    return {"items": matched, "next_cursor": cursor, "scanned": scanned}
            if page.next_cursor is None:
                return {"items": matched, "next_cursor": None, "scanned": scanned}
            cursor = page.next_cursor

    async def events(self, caller: Caller, *, execution_id: str) -> dict[str, Any]:
        """An execution's events so far, in one answer (the timeline's backlog; it then follows the SSE
        stream after the last). One the caller may not read is a LookupError, as an unknown one."""
        record = await self.engine.store.get_execution(execution_id)
        if record is None:
            raise LookupError(execution_id)
        name = record.agent.split("/", 1)[-1]
        if not await self.auth.allowed(caller, on_agents(READ, record.project_id, name)):
            raise LookupError(execution_id)
        listed = await self.engine.store.list_events(execution_id, after_seq=0)
        return {"events": [event.model_dump(mode="json") for event in listed]}

    async def agents(self, caller: Caller, *, namespace: str | None) -> dict[str, Any]:
        """The registered Agents the caller may read (one namespace, or all), with tools and policy."""
        registry = self._registry()
        if registry is None:
            return {"items": []}
        names = sorted(a for a in registry.agents if namespace is None or a.split("/", 1)[0] == namespace)
        readable = await self.auth.readable(caller, {a.split("/", 1)[0] for a in names})
        shown = [a for a in names if readable is None or a.split("/", 1)[0] in readable]
        registrations = [reg for reg in (registry.get(a) for a in shown) if reg is not None]
        surfaces = await asyncio.gather(*(self.engine.runtimes.list_tools(reg) for reg in registrations))
        return {
            "items": [_agent_view(reg, surface) for reg, surface in zip(registrations, surfaces, strict=True)]
        }

    async def tools(self, caller: Caller, *, agent: str) -> dict[str, Any]:
        """One Agent's tools with their input schemas, for the argument editor (404 if not readable)."""
        registry = self._registry()
        reg = registry.get(agent) if registry is not None else None
        if reg is None or not await self.auth.allowed(caller, on_agents(READ, reg.project_id)):
            raise LookupError(agent)
        surface = await self.engine.runtimes.list_tools(reg)
        return _agent_view(reg, surface)


def invoked_by_matches(identity: Identity | None, wanted: str) -> bool:
    """Whether an execution's invoker matches the filter: a part of the user name (case-insensitive)."""
    return identity is not None and wanted.casefold() in identity.username.casefold()


def _agent_view(reg: AgentRegistration, surface: list[dict[str, Any]] | None) -> dict[str, Any]:
    """An Agent as the console shows it: its policy, and each tool with its schema when the AER listed it."""
    published = {entry.name: entry for entry in reg.tools}
    tools: list[dict[str, Any]] = []
    for tool in surface or []:
        name = str(tool.get("name", ""))
        entry = published.get(name)
        tools.append(
            {
                "name": name,
                # The display name an MCP server gave its tool, when it gave one.
                "title": str(tool["title"]) if isinstance(tool.get("title"), str) else None,
                "description": tool.get("description") or "",
                "input_schema": tool.get("inputSchema") or tool.get("input_schema") or {},
                "sensitive": bool(entry.sensitive if entry is not None else tool.get("sensitive")),
                "location": entry.location
                if entry is not None
                else ("local" if tool.get("is_local") else "remote"),
            }
        )
    listed = {tool["name"] for tool in tools}
    tools += [
        {
            "name": e.name,
            "title": None,
            "description": "",
            "input_schema": {},
            "sensitive": e.sensitive,
            "location": e.location,
        }
        for e in reg.tools
        if e.name not in listed
    ]
    return {
        "agent": reg.agent,
        "namespace": reg.project_id,
        "policy": reg.policy.model_dump(mode="json", by_alias=True),
        "tools": tools,
        "tools_listed_by_aer": surface is not None,
        # Conditions and bundle digest as the operator last wrote them on the Agent (None: none carried).
        "status": reg.status.model_dump(mode="json", by_alias=True) if reg.status is not None else None,
    }
