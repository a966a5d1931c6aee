"""The whole loop on PostgreSQL (issue 35): a step the OE cannot audit is not stored done.

Real OE, AER and Tool Pod processes; the OE on a real PostgreSQL in which the test adds a constraint that
refuses every audit record of the `shout` tool, so the audit insert fails after the Tool Pod ran the
call, where a crash between the step's writes would strike. The step's outcome and its audit record are one
transaction, so at no moment is there a step done without its audit record; once the constraint goes, the
next execution's steps are done and audited alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import asyncpg

from tests.conftest import Process
from tests.integration.loop.harness import Platform
from tests.integration.postgres import RunningPostgres
from tests.providers.llm_peer import RunningLLMPeer

_REFUSE = (
    "ALTER TABLE audit ADD CONSTRAINT refuse_shout "
    'CHECK (position(\'"tool":"shout"\' in record) = 0) NOT VALID'
)
# Steps stored done that no audit record names: what a crash between the two writes would leave.
_UNAUDITED = (
    "SELECT s.execution_id, s.step FROM steps AS s WHERE s.state = 'done' AND NOT EXISTS ("
    "SELECT 1 FROM audit AS a WHERE a.execution_id = s.execution_id "
    "AND (a.record::jsonb ->> 'step')::int = s.step)"
)
_DONE = "SELECT step FROM steps WHERE execution_id = $1 AND state = 'done' ORDER BY step"


async def _sql(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


def test_a_step_whose_audit_insert_fails_is_never_stored_done(
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    provider_url: str,
    oe_postgres: RunningPostgres,
) -> None:
    dsn = oe_postgres.new_database()
    platform = Platform(tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url)
    platform.start_tool_pod()
    platform.start_aer()
    platform.write_registrations()
    platform.start_oe(extra={"OE_STORE_TYPE": "postgres", "OE_POSTGRES_URL": dsn})
    asyncio.run(_sql(dsn, _REFUSE))

    calls = [["key_of_call", {}], ["shout", {"text": "hi"}], ["key_of_call", {}]]
    first = platform.invoke({"mode": "calls", "calls": calls})
    # The Tool Pod answered step 2; the OE could not audit it, so the AER was told the step failed (the
    # agent carries on past a failed call).
    view = platform.wait(first, timeout=60)
    assert view["status"] in ("completed", "failed"), view
    assert "CheckViolationError" in platform.processes["oe"].output()
    assert asyncio.run(_sql(dsn, _UNAUDITED)) == []
    done = [row["step"] for row in asyncio.run(_sql(dsn, _DONE, first))]
    assert 1 in done and 2 not in done, done  # step 2's outcome went with its audit record
    assert [record for record in platform.audit(first) if record.get("tool") == "shout"] == []

    asyncio.run(_sql(dsn, "ALTER TABLE audit DROP CONSTRAINT refuse_shout"))
    second = platform.invoke({"mode": "calls", "calls": calls})
    view = platform.wait(second, timeout=60)
    assert view["status"] == "completed", view
    assert [row["step"] for row in asyncio.run(_sql(dsn, _DONE, second))] == [1, 2, 3]
    audited = {record["step"] for record in platform.audit(second) if record.get("step") is not None}
    assert {1, 2, 3} <= audited, audited
    assert asyncio.run(_sql(dsn, _UNAUDITED)) == []
