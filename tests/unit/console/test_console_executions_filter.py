"""The executions list filtered by who invoked (issue 30), across the whole list, not the pages loaded:
the OE reads the store's pages until enough match or its scan bound is reached, and the cursor goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent_runtime.console import data as console_data
from agent_runtime.console.data import BadQuery, ConsoleData, invoked_by_matches
from agent_runtime.oe.client_auth import Caller, ClientAuth
from agent_runtime.oe.store import ExecutionRecord, SqliteStore
from agent_runtime.oe.store.base import Identity

TOKEN = "static-token-for-the-filter-test-" + "x" * 16


def _record(index: int, who: str) -> ExecutionRecord:
    return ExecutionRecord(
        execution_id=f"exec-{index:04d}",
        agent="team-a/echo",
        project_id="team-a",
        workspace_id="team-a.echo",
        session_id=f"session-{index}",
        created_at=1000.0 + index,
        updated_at=1000.0 + index,
        invoked_by=Identity(username=who),
    )


def test_who_invoked_is_matched_by_part_of_the_name_case_insensitively() -> None:
    assert invoked_by_matches(Identity(username="system:serviceaccount:demo:Bob"), "bob")
    assert not invoked_by_matches(Identity(username="alice"), "bob")
    assert not invoked_by_matches(None, "bob")


def test_the_filter_reads_past_the_first_pages_and_its_cursor_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console_data, "SCAN_PAGE", 50)

    async def scenario() -> None:
        store = SqliteStore(tmp_path / "oe.db")
        await store.open()
        try:
            # 600 executions; bob invoked every 97th: the newest of his sits 100 executions deep.
            for index in range(600):
                await store.create_execution(_record(index, "bob" if index % 97 == 0 else "alice"))
            auth = ClientAuth(static_token=TOKEN)
            caller = Caller(identity=Identity(username="agent-engine:static-token"), static=True)
            data = ConsoleData(
                engine=SimpleNamespace(store=store),  # type: ignore[arg-type]  # only the store is read
                auth=auth,
                namespaces=lambda: {"team-a"},
            )

            async def page(cursor: str | None, limit: int = 2) -> dict[str, object]:
                return await data.executions(
                    caller, agent=None, status=None, invoked_by="BOB", limit=limit, cursor=cursor
                )

            first = await page(None)
            assert [i["execution_id"] for i in first["items"]] == ["exec-0582", "exec-0485"]  # type: ignore[index]
            second = await page(first["next_cursor"])  # type: ignore[arg-type]
            assert [i["execution_id"] for i in second["items"]] == ["exec-0388", "exec-0291"]  # type: ignore[index]
            rest = await page(second["next_cursor"], limit=50)  # type: ignore[arg-type]
            assert [i["execution_id"] for i in rest["items"]] == ["exec-0194", "exec-0097", "exec-0000"]  # type: ignore[index]
            assert rest["next_cursor"] is None

            # The scan is bounded: with a bound of 150 the answer stops short and says where to go on.
            monkeypatch.setattr(console_data, "SCAN_LIMIT", 150)
            bounded = await page(None, limit=50)
            assert [i["execution_id"] for i in bounded["items"]] == ["exec-0582", "exec-0485"]  # type: ignore[index]
            assert bounded["scanned"] == 150 and bounded["next_cursor"] is not None
            onward = await page(bounded["next_cursor"], limit=50)  # type: ignore[arg-type]
            assert next(i["execution_id"] for i in onward["items"]) == "exec-0388"  # type: ignore[attr-defined]

            with pytest.raises(BadQuery) as bad:
                await page("not-a-cursor")
            assert bad.value.field == "cursor"
        finally:
            await store.close()

    asyncio.run(scenario())
