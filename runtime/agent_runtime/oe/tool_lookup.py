"""Which tool a call names, as the Agent's registration lists it or, without a list, as its AER says."""

from __future__ import annotations

from collections.abc import Callable

from agent_runtime.oe.registration import AgentRegistration, ToolEntry, tool_entries
from agent_runtime.oe.runtimes import Runtimes

# How old the AER's list must be before a name missing from it is looked up again.
DISCOVERY_RETRY_S = 5.0


class ToolLookup:
    def __init__(self, runtimes: Runtimes, *, clock: Callable[[], float]) -> None:
        self.runtimes = runtimes
        self._clock = clock
        # Agent -> (token digest, when, tools) learned from its AER.
        self._discovered: dict[str, tuple[str, float, tuple[ToolEntry, ...]]] = {}

    async def entry(self, reg: AgentRegistration, name: str) -> ToolEntry | None:
        """The tool as the registration lists it; a registration without tools defers to the AER's list.

        The operator cannot see the tenant's own tools (they are in the image's code), so it publishes
        none and the OE asks the AER's `GET /tools` (which says `is_local` and `sensitive`), once per
        token, again when a name is missing and the last look is older than a few seconds.
        """
        referenced = reg.agent_ref(name)
        if referenced is not None:
            return referenced  # the registration's alone: no AER can make a tool call another Agent
        if reg.tools:
            return reg.tool(name)
        digest = reg.token_digest()
        cached = self._discovered.get(reg.agent)
        now = self._clock()
        stale = (
            cached is None
            or cached[0] != digest
            or (all(entry.name != name for entry in cached[2]) and now - cached[1] > DISCOVERY_RETRY_S)
        )
        if stale:
            surface = await self.runtimes.list_tools(reg)
            if surface is not None:
                cached = (digest, now, tool_entries(surface))
                self._discovered[reg.agent] = cached
        if cached is None:
            return None
        return next((entry for entry in cached[2] if entry.name == name), None)
