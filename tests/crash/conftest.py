"""The crash tier: one platform per module (restarting every process for each run would cost minutes),
and the campaign's figures printed at the end of the session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crash.campaign import (
    EXTRA_FIGURES,
    CrashPlatform,
    ReplicatedPlatform,
    Spawner,
    mechanism_figures,
    module_spawner,
    summary,
)
from tests.integration.ferretdb import FerretDBUnavailable, running_ferretdb
from tests.providers.ledger_provider import RunningLedger, running_ledger_provider

NO_MODEL = "http://127.0.0.1:9/v1"  # the crash agent calls no model


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningLedger]:
    with running_ledger_provider() as ledger:
        yield ledger


@pytest.fixture(scope="module")
def spawner() -> Iterator[Spawner]:
    with module_spawner() as spawn:
        yield spawn


@pytest.fixture(scope="module")
def sqlite_platform(
    tmp_path_factory: pytest.TempPathFactory, spawner: Spawner, provider: RunningLedger
) -> Iterator[CrashPlatform]:
    from tests.crash.campaign import TENANT

    tmp = tmp_path_factory.mktemp("crash-sqlite")
    yield CrashPlatform(
        tmp=tmp, spawn=spawner, llm_base_url=NO_MODEL, provider_url=provider.url, tenant=TENANT
    ).start()
    EXTRA_FIGURES.append(mechanism_figures(spawner, "sqlite"))


@pytest.fixture(scope="module")
def replicated_platform(
    tmp_path_factory: pytest.TempPathFactory, spawner: Spawner, provider: RunningLedger
) -> Iterator[ReplicatedPlatform]:
    from tests.crash.campaign import TENANT

    try:
        ferretdb = running_ferretdb()
        uri = ferretdb.__enter__()
    except FerretDBUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    tmp: Path = tmp_path_factory.mktemp("crash-mongodb")
    platform = ReplicatedPlatform(
        tmp=tmp,
        spawn=spawner,
        llm_base_url=NO_MODEL,
        provider_url=provider.url,
        tenant=TENANT,
        mongodb_uri=uri,
    )
    try:
        yield platform.start()
        EXTRA_FIGURES.append(mechanism_figures(spawner, "mongodb-2-replicas"))
    finally:
        for proc in platform.processes.values():
            proc.stop(timeout=5)
        platform.stop()
        ferretdb.__exit__(None, None, None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = summary()
    if lines:
        terminalreporter.section("crash campaign")
        for line in lines:
            terminalreporter.write_line(line)
