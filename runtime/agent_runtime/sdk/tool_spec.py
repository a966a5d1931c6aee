"""One tenant tool as the SDK holds it (`ToolSpec`): what agents see and how the runtime runs it.

Its own module, below `app` (which builds them), `context`, `secure` and `memory` (which carry them), so
that none of those imports `app` for the type (issue 42: no import cycle).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from pydantic import BaseModel

DEFAULT_TOOL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ToolSpec:
    """One tenant tool: what agents see (name, description, schema) and how the runtime runs it."""

    name: str
    description: str
    func: Callable[..., Any]
    arguments: type[BaseModel]
    input_schema: dict[str, Any]
    is_local: bool = False
    sensitive: bool = False
    required_secrets: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    is_async: bool = field(default=False)

    def schema(self) -> dict[str, Any]:
        """The tool as an agent framework registers a remote tool."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}

    def bind(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments; a pydantic ValidationError names each bad or unknown field."""
        values = self.arguments.model_validate(dict(arguments))
        return {name: getattr(values, name) for name in type(values).model_fields}

    async def acall(self, kwargs: Mapping[str, Any]) -> Any:
        """Run the tool on bound arguments; a synchronous tool runs in a worker thread, off the event loop."""
        if self.is_async:
            return await self.func(**kwargs)
        return await anyio.to_thread.run_sync(lambda: self.func(**kwargs))

    async def ainvoke(self, arguments: Mapping[str, Any]) -> Any:
        """Validate the arguments and run the tool."""
        return await self.acall(self.bind(arguments))
