"""The store's issue-34 primitives on every backend: the audit's hash chain (also under concurrent appends
from two replicas), chain heads kept by seq, usage counters, and rate-limit slots no two replicas share."""

from __future__ import annotations

import asyncio

import pytest

from agent_runtime.audit_chain import record_hash, verify
from agent_runtime.oe.store import AuditRecord, Store
from tests.integration.stores import Backend

pytestmark = pytest.mark.integration
T0 = 1_760_000_000.25


def audit(execution_id: str, n: int) -> AuditRecord:
    return AuditRecord(
        execution_id=execution_id,
        step=n,
        agent="team-a/echo",
        workspace_id="team-a.echo",
        kind="tool",
        tool="echo_get",
        args={"q": f"Ω {n}", "n": n / 3},
        decision="allow",
        at=T0 + n,
    )


def test_appends_link_each_record_to_the_one_before(backend: Backend[Store]) -> None:
    async def scenario(store: Store) -> None:
        first = await store.append_audit(audit("e-1", 0))
        assert (first.seq, first.prev_hash) == (1, "")
        second = await store.append_audit(audit("e-1", 1))
        assert (second.seq, second.prev_hash) == (2, first.hash)
        other = await store.append_audit(audit("e-2", 0))
        assert other.seq == 1  # one chain per execution
        listed = await store.list_audit("e-1")
        assert [r.seq for r in listed] == [1, 2]
        dumped = [r.model_dump(mode="json") for r in listed]
        assert [record_hash(d) for d in dumped] == [first.hash, second.hash]  # what was stored re-hashes
        assert verify(
            dumped, head={"execution_id": "e-1", "seq": 2, "hash": second.hash}, public_keys=[]
        ).intact

    backend.run(scenario)


def test_concurrent_appends_from_two_replicas_form_one_chain(backend: Backend[Store]) -> None:
    async def scenario(store: Store) -> None:
        other = backend.make()
        await other.open()
        try:
            appended = await asyncio.gather(
                *((store if n % 2 else other).append_audit(audit("e-1", n)) for n in range(30))
            )
        finally:
            await other.close()
        assert sorted(r.seq for r in appended if r.seq is not None) == list(range(1, 31))
        listed = [r.model_dump(mode="json") for r in await store.list_audit("e-1")]
        head = {"execution_id": "e-1", "seq": 30, "hash": listed[-1]["hash"]}
        assert verify(listed, head=head, public_keys=[]).view() == {
            "intact": True,
            "records": 30,
            "head_signed": False,
        }

    backend.run(scenario)


def test_a_head_is_kept_only_over_a_lower_one(backend: Backend[Store]) -> None:
    async def scenario(store: Store) -> None:
        assert await store.get_audit_head("e-1") is None
        await store.set_audit_head("e-1", {"execution_id": "e-1", "seq": 2, "hash": "b", "signature": "s2"})
        await store.set_audit_head("e-1", {"execution_id": "e-1", "seq": 1, "hash": "a"})  # a slower writer
        assert await store.get_audit_head("e-1") == {
            "execution_id": "e-1",
            "seq": 2,
            "hash": "b",
            "signature": "s2",
        }
        await store.set_audit_head("e-1", {"execution_id": "e-1", "seq": 3, "hash": "c"})
        assert (await store.get_audit_head("e-1") or {})["seq"] == 3

    backend.run(scenario)


def test_usage_counters_add_up_across_replicas(backend: Backend[Store]) -> None:
    async def scenario(store: Store) -> None:
        assert await store.get_usage("exec:e-1") == {}
        first = await store.add_usage("exec:e-1", {"steps": 1, "tokens": 120}, expires_at=T0)
        assert first == {"steps": 1, "model_calls": 0, "tool_calls": 0, "tokens": 120, "cost": 0}
        other = backend.make()
        await other.open()
        try:
            # One replica's adds at once: each counts (two replicas at the same instant on FerretDB v1
            # may lose one, as Store.add_usage says; here they take turns).
            await asyncio.gather(
                *(store.add_usage("exec:e-1", {"steps": 1, "cost": 0.25}, expires_at=T0) for _ in range(10))
            )
            await other.add_usage("exec:e-1", {"model_calls": 2}, expires_at=T0 + 1)
        finally:
            await other.close()
        assert await store.get_usage("exec:e-1") == {
            "steps": 11,
            "model_calls": 2,
            "tool_calls": 0,
            "tokens": 120,
            "cost": 2.5,
        }
        with pytest.raises(ValueError, match="unknown usage counters"):
            await store.add_usage("exec:e-1", {"dollars": 1}, expires_at=T0)

    backend.run(scenario)


def test_rate_slots_are_never_held_twice_across_replicas(backend: Backend[Store]) -> None:
    async def scenario(store: Store) -> None:
        other = backend.make()
        await other.open()
        try:
            slots = list(range(110, 100, -1))  # ten slots, newest first
            taken = await asyncio.gather(
                *(
                    (store if n % 2 else other).take_rate_slot("rate:a", slots, expires_at=T0)
                    for n in range(16)
                )
            )
        finally:
            await other.close()
        held = [slot for slot in taken if slot is not None]
        assert sorted(held) == list(range(101, 111))  # each slot once, the other six refused
        assert taken.count(None) == 6
        assert await store.take_rate_slot("rate:b", slots, expires_at=T0) == 110  # another bucket
        # The window moves on: older slots are dropped, the new one is free.
        assert await store.take_rate_slot("rate:a", list(range(111, 101, -1)), expires_at=T0) == 111

    backend.run(scenario)
