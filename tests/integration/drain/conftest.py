"""Fixtures for the drain and interrupt/call tier: platforms shared by a module, one per runtime settings."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.conftest import Process
from tests.integration.drain.harness import DrainPlatform, start_platform


@pytest.fixture(scope="module")
def module_spawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Process]]:
    """`spawn` for a whole module: every process is stopped at its end, its output shown if a test failed."""
    logs = tmp_path_factory.mktemp("logs")
    started: list[Process] = []

    def spawn(argv: list[str], *, env: dict[str, str] | None = None, name: str = "", **_: object) -> Process:
        log_path = Path(tempfile.mkstemp(prefix=f"{name or 'proc'}-", suffix=".log", dir=logs)[1])
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        proc = Process(argv=argv, popen=popen, log_path=log_path, name=name)
        started.append(proc)
        return proc

    yield spawn
    for proc in started:
        with contextlib.suppress(Exception):
            proc.stop(timeout=5)


@pytest.fixture(scope="module")
def platforms(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process]
) -> Callable[[Mapping[str, str]], DrainPlatform]:
    """A platform for given runtime settings, started on first use and kept for the module."""
    started: dict[tuple[tuple[str, str], ...], DrainPlatform] = {}

    def get(settings: Mapping[str, str]) -> DrainPlatform:
        key = tuple(sorted(settings.items()))
        if key not in started:
            tmp = tmp_path_factory.mktemp("platform")
            started[key] = start_platform(tmp, module_spawn, settings)
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
