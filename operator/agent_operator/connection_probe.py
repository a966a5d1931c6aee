"""Asking the OE to test a Connector's connection (issue 36): the thin I/O beside connection.py's decisions.

The operator's token for the OE is read from its file at each test (the kubelet rotates a projected
token); it is sent to the OE and nowhere else, and no log line or condition carries it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from agent_operator.connection import (
    CONNECTED,
    ConnectionSettings,
    LastTest,
    due,
    from_answer,
    not_configured,
    pick_agent,
    token_unreadable,
    unreachable,
)
from agent_operator.status import Condition

log = logging.getLogger("agent_operator")
Key = tuple[str, str]


class ConnectionProbe:
    """Tests Connectors through the OE and remembers when each was last tested."""

    def __init__(self, *, oe_url: str, settings: ConnectionSettings) -> None:
        self.oe_url = oe_url.rstrip("/")
        self.settings = settings
        self.tested: dict[Key, LastTest] = {}
        self.asked: set[Key] = set()
        self._session: aiohttp.ClientSession | None = None

    def forget(self, key: Key) -> None:
        self.tested.pop(key, None)
        self.asked.discard(key)

    def ask(self, key: Key) -> None:
        """Test `key` at its next reconcile (an Agent that uses it became Ready)."""
        self.asked.add(key)

    def due(self, key: Key, body: Mapping[str, Any]) -> bool:
        generation = int((body.get("metadata") or {}).get("generation") or 0)
        if key not in self.tested and (seen := _stored(body, generation)) is not None:
            # A restart: what status says of this generation counts as tested now, so a restart writes
            # nothing (and says nothing before its Agents are listed); the period tests it again.
            self.tested[key] = LastTest(generation=generation, at=time.monotonic(), status=seen)
        return due(
            self.tested.get(key),
            generation=generation,
            now=time.monotonic(),
            settings=self.settings,
            asked=key in self.asked,
        )

    async def condition(
        self, key: Key, body: Mapping[str, Any], *, agents: Mapping[Key, Mapping[str, Any]]
    ) -> Condition | None:
        """The Connected condition when a test is due (None: keep the one in status)."""
        if not self.due(key, body):
            return None
        self.asked.discard(key)
        generation = int((body.get("metadata") or {}).get("generation") or 0)
        found = await self._test(key, agents)
        self.tested[key] = LastTest(generation=generation, at=time.monotonic(), status=found.status)
        return found

    async def _test(self, key: Key, agents: Mapping[Key, Mapping[str, Any]]) -> Condition:
        if not self.settings.token_file:
            return not_configured()
        picked = pick_agent(key[0], key[1], agents)
        if isinstance(picked, Condition):
            return picked
        try:
            token = (await asyncio.to_thread(Path(self.settings.token_file).read_text)).strip()
        except OSError as exc:
            return token_unreadable(self.settings.token_file, type(exc).__name__)
        ns, connector = (quote(part, safe="") for part in key)
        url = (
            f"{self.oe_url}/api/v1/projects/{ns}/agents/{quote(picked, safe='')}/connectors/{connector}/test"
        )
        try:
            async with self._http().post(url, headers={"Authorization": f"Bearer {token}"}) as response:
                status, raw = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("connection test not run", extra={"connector": key[1], "namespace": key[0],
                                                           "error": type(exc).__name__})  # fmt: skip
            return unreachable(self.oe_url, type(exc).__name__)
        answer = _json(raw)
        found = from_answer(agent=picked, status=status, body=answer)
        log.info(
            "connection tested",
            extra={"connector": key[1], "namespace": key[0], "agent": picked, "status": found.status,
                   "reason": found.reason},
        )  # fmt: skip
        return found

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.settings.timeout_seconds)
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _json(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _stored(body: Mapping[str, Any], generation: int) -> str | None:
    """The status of the Connected condition `body` carries for `generation`, if any."""
    for condition in (body.get("status") or {}).get("conditions") or []:
        if condition.get("type") == CONNECTED and condition.get("observedGeneration") == generation:
            return str(condition.get("status"))
    return None
