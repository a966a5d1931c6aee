"""Fixtures for the drain and interrupt/call tier: platforms shared by a module, one per runtime settings."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping

import pytest

from tests.conftest import Process
from tests.integration.drain.harness import DrainPlatform, start_platform
from tests.integration.drain.node_runtime import start_node_platform

STARTERS = {"python": start_platform, "node": start_node_platform}


@pytest.fixture(scope="module")
def platforms(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process]
) -> Callable[..., DrainPlatform]:
    """A platform for given runtime settings and runtime language (`python`, or `node`: the TypeScript
    runner as AER and Tool Pod), started on first use and kept for the module."""
    started: dict[tuple[str, tuple[tuple[str, str], ...]], DrainPlatform] = {}

    def get(settings: Mapping[str, str], language: str = "python") -> DrainPlatform:
        key = (language, tuple(sorted(settings.items())))
        if key not in started:
            tmp = tmp_path_factory.mktemp(f"platform-{language}")
            started[key] = STARTERS[language](tmp, module_spawn, settings)
        return started[key]

    return get


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed vector shows the platform's logs (the module's processes outlive the test)."""
    outcome = yield
    report = outcome.get_result()
    platform = getattr(item, "drain_platform", None)
    if report.when == "call" and report.failed and platform is not None:
        sys.stderr.write(platform.outputs()[-20000:])
