"""The third-party checkpointer conformance suite (langgraph-checkpoint-conformance) against the platform
checkpointer, on every backend: memory, SQLite (a file) and MongoDB (FerretDB).

What passes is printed (`pytest -s`) and asserted: every base capability (put, put_writes, get_tuple, list,
delete_thread) passes on every backend. The extended ones (delete_for_runs, copy_thread, prune) are not
implemented by any backend saver LangGraph ships for them (InMemorySaver, AsyncSqliteSaver,
MongoDBSaver); the platform checkpointer implements copy_thread itself over the backend's own calls
(`langgraph/thread_copy.py`), so the suite runs it, and does not claim the other two (skipped).

The platform's deliberate refusals are run through the same suite and documented by exactly what fails:
- fail closed (CP-04, managed runtime without APP_ID): every capability fails, reads included;
- after a platform failure in the run (LG-08): the first save raises PlatformFailure, a BaseException the
  suite does not catch, so the suite stops there and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import CapabilityReport
from pymongo import MongoClient

from agent_runtime.langgraph import PlatformCheckpointer, checkpoint_settings
from agent_runtime.sdk.context import RequestContext, run_scope
from agent_runtime.sdk.errors import PlatformFailure

BASE = {"put", "put_writes", "get_tuple", "list", "delete_thread"}
EXTENDED = {"delete_for_runs", "copy_thread", "prune"}


def _settings_env(backend: str, *, tmp: Path, uri: str | None) -> Callable[[], dict[str, str]]:
    """A fresh store for each capability suite, as the suite expects."""

    def env() -> dict[str, str]:
        fresh = uuid.uuid4().hex[:12]
        if backend == "memory":
            return {"CHECKPOINT_STORE": "memory"}
        if backend == "sqlite":
            return {"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": str(tmp / f"{fresh}.sqlite3")}
        assert uri is not None
        return {"MONGODB_URI": uri, "CHECKPOINT_DB_NAME": f"conformance_{fresh}"}

    return env


def _run_suite(name: str, env: Callable[[], dict[str, str]]) -> CapabilityReport:
    @checkpointer_test(name=name)
    async def factory() -> AsyncIterator[PlatformCheckpointer]:
        saver = PlatformCheckpointer.from_settings(checkpoint_settings(env()))
        try:
            yield saver
        finally:
            await saver.aclose()

    report = asyncio.run(validate(factory))
    report.print_report()
    return report


@pytest.fixture(params=["memory", "sqlite", "mongodb"])
def backend_env(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Callable[[], dict[str, str]]]:
    uri = request.getfixturevalue("ferretdb_uri") if request.param == "mongodb" else None
    return request.param, _settings_env(request.param, tmp=tmp_path, uri=uri)


def test_the_platform_checkpointer_passes_every_base_capability(
    backend_env: tuple[str, Callable[[], dict[str, str]]],
) -> None:
    backend, env = backend_env
    report = _run_suite(f"PlatformCheckpointer[{backend}]", env)
    results = report.results
    failures = {cap: results[cap].failures for cap in BASE if results[cap].passed is not True}
    assert not failures, failures
    assert report.passed_all_base() and report.conformance_level() == "FULL"
    assert sum(results[cap].tests_passed for cap in BASE) == 58
    # copy_thread: the platform checkpointer's own over the backend's calls (thread_copy.py), claimed and
    # passing on each backend; delete_for_runs and prune are still not claimed.
    copy = results["copy_thread"]
    assert copy.detected is True and copy.passed is True, copy.failures
    assert copy.tests_passed > 0 and copy.tests_failed == 0
    assert all(results[cap].detected is False for cap in EXTENDED - {"copy_thread"})


def test_fail_closed_is_a_deliberate_failure_of_every_capability(
    backend_env: tuple[str, Callable[[], dict[str, str]]],
) -> None:
    backend, env = backend_env

    def managed_without_app_id() -> dict[str, str]:
        return {**env(), "REQUIRE_PROJECT_SCOPED_DB": "true"}

    report = _run_suite(f"PlatformCheckpointer[{backend}, no APP_ID]", managed_without_app_id)
    for cap in BASE:
        result = report.results[cap]
        assert result.passed is False and result.tests_passed == 0, (cap, result)
        assert all("APP_ID is not" in failure for failure in result.failures), result.failures[:1]


def test_saves_after_a_platform_failure_are_a_deliberate_failure(tmp_path: Path) -> None:
    env = _settings_env("sqlite", tmp=tmp_path, uri=None)
    context = RequestContext(execution_id="conformance-run")
    with run_scope(context, oe=None) as run:
        run.platform_failure = "the OE did not answer POST /tool/execute in time (step 3)"
        # The refusal is a PlatformFailure, a BaseException (so tenant code cannot swallow it); the suite's
        # runner catches Exception only, so the suite stops at its first save.
        with pytest.raises(PlatformFailure, match="refused after a platform failure"):
            _run_suite("PlatformCheckpointer[sqlite, after a platform failure]", env)
    for path in tmp_path.glob("*.sqlite3"):
        with contextlib.closing(sqlite3.connect(path)) as db:
            assert db.execute("select count(*) from checkpoints").fetchone() == (0,)
            assert db.execute("select count(*) from writes").fetchone() == (0,)


def test_mongodb_checkpoints_land_in_the_project_database(ferretdb_uri: str) -> None:
    """CP-03: `<MDB_AGENTIC_STORE_DB>_<project>` unless CHECKPOINT_DB_NAME names it exactly."""
    settings = checkpoint_settings(
        {"MONGODB_URI": ferretdb_uri, "MDB_AGENTIC_STORE_DB": "lgstore", "APP_ID": "team-a.support"}
    )
    assert settings.db_name == "lgstore_team_a"
    saver = PlatformCheckpointer.from_settings(settings)

    async def put_one() -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        config = {"configurable": {"thread_id": "sess:team-a.support", "checkpoint_ns": ""}}
        await saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        await saver.aclose()

    asyncio.run(put_one())
    with MongoClient(ferretdb_uri) as client:
        assert (
            client["lgstore_team_a"]["checkpoints"].count_documents({"thread_id": "sess:team-a.support"}) == 1
        )
