"""A step's outcome, the suspension it holds and its audit record are one transaction on PostgreSQL
(issue 35): `PostgresStore.atomic()` against a real server, the audit insert made to fail by a constraint
the test adds (what a crash between the writes would leave, without the luck of timing a kill)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from agent_runtime.oe.store import PostgresStore
from agent_runtime.oe.store.base import AuditRecord
from agent_runtime.protocol import CallOutcome
from tests.integration.oe.test_store import T0, execution, step
from tests.integration.postgres import RunningPostgres

# The audit refuses any record of this tool: the insert fails inside the step's transaction.
_REFUSE_AUDIT = (
    'ALTER TABLE audit ADD CONSTRAINT refuse_boom CHECK (position(\'"tool":"boom"\' in record) = 0) NOT VALID'
)


def _audit(execution_id: str, number: int, *, tool: str) -> AuditRecord:
    return AuditRecord(
        execution_id=execution_id,
        step=number,
        agent="team-a/echo",
        workspace_id="team-a.echo",
        kind="tool",
        tool=tool,
        decision="allow",
        at=T0,
    )


async def _admin(dsn: str, sql: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _write_step(store: PostgresStore, execution_id: str, number: int, *, tool: str) -> None:
    """What the engine does for a step that ran (oe/steps.py): outcome, suspension, audit, in one block."""
    async with store.atomic():
        await store.finish_step(execution_id, number, CallOutcome(status="suspend", result={"ask": 1}), at=T0)
        await store.update_execution(execution_id, {"suspension": {"step": number}})
        await store.append_audit(_audit(execution_id, number, tool=tool))


def test_a_failed_audit_insert_rolls_back_the_step_and_its_suspension(oe_postgres: RunningPostgres) -> None:
    dsn = oe_postgres.new_database()

    async def scenario() -> None:
        store = PostgresStore(dsn, pool_size=3)
        await store.open()
        try:
            await store.create_execution(execution("e-1"))
            for number, tool in ((1, "echo_get"), (2, "boom")):
                await store.claim_step(step("e-1", number, tool=tool))
            await _admin(dsn, _REFUSE_AUDIT)

            await _write_step(store, "e-1", 1, tool="echo_get")
            with pytest.raises(asyncpg.CheckViolationError):
                await _write_step(store, "e-1", 2, tool="boom")

            kept, lost = await store.get_step("e-1", 1), await store.get_step("e-1", 2)
            assert kept is not None and kept.state == "done"
            # The step whose audit record could not be written is not done, holds nothing, is not audited.
            assert lost is not None and lost.state == "in_progress" and lost.outcome is None
            record = await store.get_execution("e-1")
            assert record is not None and record.suspension == {"step": 1}
            assert [entry.step for entry in await store.list_audit("e-1")] == [1]
            # The connection went back to the pool clean: the next calls work, outside a block and inside.
            await _admin(dsn, "ALTER TABLE audit DROP CONSTRAINT refuse_boom")
            await _write_step(store, "e-1", 2, tool="boom")
            again = await store.get_step("e-1", 2)
            assert again is not None and again.state == "done"
            assert [entry.step for entry in await store.list_audit("e-1")] == [1, 2]
        finally:
            await store.close()

    asyncio.run(scenario())


def test_writes_inside_a_block_are_invisible_outside_until_it_ends(oe_postgres: RunningPostgres) -> None:
    """One transaction: another connection (a task started inside, another replica) sees nothing of the
    block before it commits, and all of it after; a nested block joins the outer one."""
    dsn = oe_postgres.new_database()

    async def scenario() -> None:
        store, other = PostgresStore(dsn, pool_size=3), PostgresStore(dsn, pool_size=1)
        await store.open()
        await other.open()
        try:
            await store.create_execution(execution("e-2"))
            await store.claim_step(step("e-2", 1))
            async with store.atomic():
                await store.finish_step("e-2", 1, CallOutcome(status="success", result={"ok": 1}), at=T0)
                async with store.atomic():
                    await store.append_audit(_audit("e-2", 1, tool="echo_get"))
                # The block's own reads see its writes; another replica's and another task's do not.
                mine = await store.get_step("e-2", 1)
                assert mine is not None and mine.state == "done"
                theirs = await other.get_step("e-2", 1)
                assert theirs is not None and theirs.state == "in_progress"
                spawned = await asyncio.get_running_loop().create_task(store.list_audit("e-2"))
                assert spawned == []
            after = await other.get_step("e-2", 1)
            assert after is not None and after.state == "done"
            assert [entry.step for entry in await other.list_audit("e-2")] == [1]
        finally:
            await store.close()
            await other.close()

    asyncio.run(scenario())
