"""`make`: every executor test runs twice, through `execute` (httpx) and `aexecute` (aiohttp)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_runtime.connectors import ConnectorExecutor, ToolDefinitions, ToolResponse


class AsyncFacade:
    """`execute` through `aexecute` on one event loop, so each test runs against both paths."""

    def __init__(self, executor: ConnectorExecutor) -> None:
        self._executor = executor
        self._runner = asyncio.Runner()
        self.definitions = executor.definitions

    def execute(
        self, tool: str, arguments: dict[str, Any], env: dict[str, str] | None = None
    ) -> ToolResponse:
        return self._runner.run(self._executor.aexecute(tool, arguments, env=env))

    def close(self) -> None:
        self._runner.run(self._executor.aclose())
        self._runner.close()


@pytest.fixture(params=["sync", "async"])
def make(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """`make(connector, **options)`: an executor (or its async facade), closed after the test."""
    made: list[Any] = []

    def _make(connector: ToolDefinitions, **options: Any) -> Any:
        executor = ConnectorExecutor(connector, **options)
        facade = executor if request.param == "sync" else AsyncFacade(executor)
        made.append(facade)
        return facade

    yield _make
    for facade in made:
        facade.close()
