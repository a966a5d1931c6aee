"""The one suite every OE store backend passes (SQLite in a temp dir, MongoDB wire protocol on FerretDB)."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.oe.store import (
    AuditRecord,
    DeliveryRecord,
    DeliveryTarget,
    ExecutionRecord,
    Review,
    ServedRuntime,
    SqliteStore,
    StepRecord,
    Store,
)
from agent_runtime.oe.store.base import Identity, ParentLink, StepDecider
from agent_runtime.protocol import CallError, CallOutcome, ExecutionState
from tests.conftest import REPO_ROOT
from tests.integration.stores import Backend

T0 = 1_760_000_000.123456  # a fixed epoch with sub-second digits that must survive every round trip
S = ExecutionState


def execution(
    execution_id: str, *, agent: str = "team-a/echo", at: float = T0, **extra: Any
) -> ExecutionRecord:
    namespace, name = agent.split("/")
    return ExecutionRecord(
        execution_id=execution_id,
        agent=agent,
        project_id=namespace,
        workspace_id=f"{namespace}.{name}",
        session_id=f"session-{execution_id}",
        created_at=at,
        updated_at=at,
        **extra,
    )


def step(execution_id: str, number: int, *, owner: str = "oe-1", tool: str = "echo_get") -> StepRecord:
    return StepRecord(
        execution_id=execution_id,
        step=number,
        tool=tool,
        fingerprint=f"sha256:{execution_id}:{number}",
        owner=owner,
        created_at=T0,
        updated_at=T0,
    )


async def warm_up(store: Store, n: int = 25) -> None:
    """Open `n` connections first (a MongoDB client opens them on demand, two at a time), so that the
    concurrent calls that follow really reach the server at once."""
    await asyncio.gather(*(store.get_execution("warm-up") for _ in range(n)))


# executions


def test_create_get_and_duplicate_id(backend: Backend) -> None:
    record = execution("e-1", input={"question": "¿qué tal? 你好", "n": [1, 2.5, None]}, user_id="u-7")

    async def scenario(store: Store) -> None:
        assert await store.get_execution("e-1") is None
        await store.create_execution(record)
        assert await store.get_execution("e-1") == record
        with pytest.raises(KeyError):
            await store.create_execution(execution("e-1", agent="team-b/other"))
        assert await store.get_execution("e-1") == record
        assert await store.count_executions() == 1

    backend.run(scenario)


def test_open_is_idempotent_and_a_new_store_sees_the_data(backend: Backend) -> None:
    async def write(store: Store) -> None:
        await store.open()  # again: nothing changes
        await store.create_execution(execution("e-1"))

    async def read(store: Store) -> ExecutionRecord | None:
        return await store.get_execution("e-1")

    backend.run(write)
    assert backend.run(read) == execution("e-1")


def test_transition_is_compare_and_set(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        await store.create_execution(execution("e-1"))
        # Wrong from-state: None, and nothing changes.
        missed = await store.transition(
            "e-1", from_states=frozenset({S.RUNNING, S.SUSPENDED}), changes={"status": S.COMPLETED, "runs": 9}
        )
        assert missed is None
        assert await store.get_execution("e-1") == execution("e-1")
        assert await store.transition("nope", from_states=frozenset({S.PENDING}), changes={"runs": 1}) is None
        assert await store.transition("e-1", from_states=frozenset(), changes={"runs": 1}) is None

        running = await store.transition(
            "e-1",
            from_states=frozenset({S.PENDING}),
            changes={"status": "running", "runs": 1, "updated_at": T0 + 1},
        )
        assert running is not None
        assert (running.status, running.runs, running.updated_at) == (S.RUNNING, 1, T0 + 1)
        suspension = {
            "reason": "approval",
            "tool": "refund",
            "args": {"$ref": "#/x", "a.b": [1, {"c": None}]},
        }
        suspended = await store.transition(
            "e-1",
            from_states=frozenset({S.RUNNING}),
            changes={"status": S.SUSPENDED, "suspension": suspension},
        )
        assert suspended is not None and suspended.suspension == suspension
        failed = await store.transition(
            "e-1",
            from_states=frozenset({S.SUSPENDED}),
            changes={
                "status": S.FAILED,
                "suspension": None,
                "error": CallError(category="rejected_by_reviewer", explanation="nope ✋"),
                "finished_at": T0 + 2.5,
            },
        )
        assert failed == await store.get_execution("e-1")
        assert failed is not None
        assert (failed.status, failed.suspension, failed.finished_at) == (S.FAILED, None, T0 + 2.5)
        assert failed.error == CallError(category="rejected_by_reviewer", explanation="nope ✋")
        # A status filter matches the new status only.
        assert (await store.list_executions(status=S.FAILED)).items == [failed]
        assert (await store.list_executions(status=S.PENDING)).items == []
        # No changes: a pure status check.
        assert await store.transition("e-1", from_states=frozenset({S.FAILED}), changes={}) == failed
        assert await store.transition("e-1", from_states=frozenset({S.RUNNING}), changes={}) is None

        for bad in ({"nope": 1}, {"execution_id": "e-2"}, {"created_at": 1.0}, {"status": "exploded"}):
            with pytest.raises(ValueError):
                await store.transition("e-1", from_states=frozenset({S.FAILED}), changes=bad)
        assert await store.get_execution("e-1") == failed

    backend.run(scenario)


def test_concurrent_transitions_exactly_one_wins(backend: Backend) -> None:
    ids = [f"e-{n}" for n in range(5)]

    async def scenario(store: Store) -> None:
        for execution_id in ids:
            await store.create_execution(execution(execution_id))
        await warm_up(store)
        # Five executions, each raced by twenty transitions with different changes, all at once.
        results = await asyncio.gather(
            *(
                store.transition(
                    execution_id, from_states=frozenset({S.PENDING}), changes={"status": S.RUNNING, "runs": i}
                )
                for i in range(1, 21)
                for execution_id in ids
            )
        )
        for execution_id in ids:
            winners = [r for r in results if r is not None and r.execution_id == execution_id]
            assert len(winners) == 1, execution_id
            assert await store.get_execution(execution_id) == winners[0]
            assert winners[0].status == S.RUNNING

    backend.run(scenario)


def test_update_execution_and_note_step(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        await store.create_execution(execution("e-1"))
        await store.update_execution("e-1", {"cancel_requested": True, "result": {"out": "ok ✓"}, "runs": 2})
        await store.update_execution("e-1", {})
        await store.update_execution("missing", {"runs": 1})  # no such id: nothing happens
        with pytest.raises(ValueError):
            await store.update_execution("e-1", {"status": S.COMPLETED})
        with pytest.raises(ValueError):
            await store.update_execution("e-1", {"runs": "many"})

        await store.note_step("e-1", 3, at=T0 + 3)
        await store.note_step("e-1", 2, at=T0 + 4)  # lower: step_count stays, updated_at moves
        await store.note_step("e-1", 5, at=T0 + 5.25)
        record = await store.get_execution("e-1")
        assert record is not None
        assert (record.step_count, record.updated_at) == (5, T0 + 5.25)
        assert (record.cancel_requested, record.result, record.runs) == (True, {"out": "ok ✓"}, 2)
        assert record.status == S.PENDING

        await warm_up(store)
        await asyncio.gather(*(store.note_step("e-1", n, at=T0 + n) for n in (9, 7, 8, 6)))
        await asyncio.gather(
            *(store.update_execution("e-1", {"runs": 7}), store.update_execution("e-1", {"org_id": "o-1"}))
        )
        record = await store.get_execution("e-1")
        assert record is not None
        assert (record.step_count, record.runs, record.org_id, record.result) == (
            9,
            7,
            "o-1",
            {"out": "ok ✓"},
        )

    backend.run(scenario)


def test_list_executions_order_filters_and_pages(backend: Backend) -> None:
    # 23 executions: three share one created_at (ties order by id), two agents, three statuses.
    records = []
    for i in range(23):
        at = T0 + (100 if i in (4, 5, 6) else i)
        agent = "team-a/echo" if i % 3 else "team-b/shop"
        status = (S.PENDING, S.RUNNING, S.COMPLETED)[i % 4 % 3]
        records.append(execution(f"e-{i:02d}", agent=agent, at=at, status=status))
    newest_first = sorted(records, key=lambda r: (r.created_at, r.execution_id), reverse=True)

    async def pages(store: Store, **filters: Any) -> list[list[str]]:
        seen: list[list[str]] = []
        cursor = None
        while True:
            page = await store.list_executions(limit=4, cursor=cursor, **filters)
            seen.append([r.execution_id for r in page.items])
            if page.next_cursor is None:
                return seen
            cursor = page.next_cursor

    async def scenario(store: Store) -> None:
        for record in records:
            await store.create_execution(record)
        assert await store.count_executions() == 23

        everything = await store.list_executions()
        assert everything.items == newest_first and everything.next_cursor is None
        assert [r.execution_id for r in everything.items[:4]] == ["e-06", "e-05", "e-04", "e-22"]

        walked = await pages(store)
        assert [len(p) for p in walked] == [4, 4, 4, 4, 4, 3]
        assert [i for p in walked for i in p] == [r.execution_id for r in newest_first]

        for filters in (
            {"agent": "team-b/shop"},
            {"status": S.RUNNING},
            {"agent": "team-a/echo", "status": S.PENDING},
            {"project_id": "team-a"},
            {"project_id": "team-b", "status": S.COMPLETED},
        ):
            expected = [
                r.execution_id
                for r in newest_first
                if r.agent == filters.get("agent", r.agent)
                and r.project_id == filters.get("project_id", r.project_id)
                and r.status == filters.get("status", r.status)
            ]
            assert expected, filters
            assert [i for p in await pages(store, **filters) for i in p] == expected, filters
        assert (await store.list_executions(agent="team-z/none")).items == []
        assert (await store.list_executions(project_id="team-z")).items == []

        exact = await store.list_executions(limit=23)
        assert len(exact.items) == 23 and exact.next_cursor is None
        with pytest.raises(ValueError):
            await store.list_executions(cursor="not a cursor")
        with pytest.raises(ValueError):
            await store.list_executions(limit=0)

    backend.run(scenario)


def test_lists_keep_only_the_namespaces_a_client_may_read_and_identities_round_trip(backend: Backend) -> None:
    """Issue 28: `project_ids` filters a list to readable namespaces (empty: nothing); who invoked, decided,
    cancelled and interrupted is kept with the execution."""
    alice = Identity(
        username="system:serviceaccount:people:alice", uid="u-1", groups=["system:authenticated"]
    )
    carol = Identity(username="oidc:carol", groups=["oidc:ops"])
    records = [
        execution(f"e-{i}", agent=f"{ns}/bot", at=T0 + i)
        for i, ns in enumerate(["team-a", "team-b", "team-c"] * 3)
    ]
    records[0] = records[0].model_copy(update={"invoked_by": alice})

    async def scenario(store: Store) -> None:
        for record in records:
            await store.create_execution(record)
        page = await store.list_executions(project_ids=frozenset({"team-a", "team-c"}), limit=4)
        assert [r.execution_id for r in page.items] == ["e-8", "e-6", "e-5", "e-3"] and page.next_cursor
        rest = await store.list_executions(
            project_ids=frozenset({"team-a", "team-c"}), cursor=page.next_cursor
        )
        assert [r.execution_id for r in rest.items] == ["e-2", "e-0"]
        assert (await store.list_executions(project_ids=frozenset())).items == []
        both = await store.list_executions(project_id="team-b", project_ids=frozenset({"team-a"}))
        assert both.items == []
        stored = await store.get_execution("e-0")
        assert stored is not None and stored.invoked_by == alice
        review = Review(step=1, kind="approval_required", decision="approved", at=T0, decided_by=carol)
        updated = await store.transition(
            "e-0",
            from_states=frozenset({S.PENDING}),
            changes={
                "status": S.CANCELLED,
                "reviews": [review],
                "cancelled_by": carol,
                "interrupted_by": [StepDecider(step=2, by=alice, at=T0)],
            },
        )
        assert (
            updated is not None and updated.cancelled_by == carol and updated.reviews[0].decided_by == carol
        )
        again = await store.get_execution("e-0")
        assert again == updated and again.interrupted_by[0].by == alice
        await store.append_audit(
            AuditRecord(
                execution_id="e-0",
                agent="team-a/bot",
                workspace_id="team-a.bot",
                kind="cancel",
                decision="cancelled",
                decided_by=carol,
                at=T0,
            )
        )
        assert (await store.list_audit("e-0"))[0].decided_by == carol

    backend.run(scenario)


# steps


def test_claim_step_first_wins(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        first = step("e-1", 1, owner="oe-1")
        assert await store.claim_step(first) is None
        assert await store.claim_step(step("e-1", 1, owner="oe-2", tool="other")) == first
        assert await store.get_step("e-1", 1) == first
        assert await store.claim_step(step("e-1", 2)) is None  # another step of the same execution
        assert await store.claim_step(step("e-2", 1)) is None  # the same step of another execution
        assert await store.get_step("e-1", 3) is None

    backend.run(scenario)


def test_concurrent_claims_exactly_one_wins(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        other = backend.make()  # a second OE replica on the same data
        await other.open()
        try:
            await asyncio.gather(warm_up(store), warm_up(other))
            results = await asyncio.gather(
                *((store if i % 2 else other).claim_step(step("e-1", 1, owner=f"oe-{i}")) for i in range(20))
            )
        finally:
            await other.close()
        assert sum(r is None for r in results) == 1
        stored = await store.get_step("e-1", 1)
        assert stored is not None
        assert all(r == stored for r in results if r is not None)
        assert results[int(stored.owner.removeprefix("oe-"))] is None  # the winner is the one stored

    backend.run(scenario)


def test_finish_reset_and_delete_steps(backend: Backend) -> None:
    outcome = CallOutcome(
        status="success",
        result={
            "text": "naïve café ☕ — 日本語 🚀",
            "nested": {"list": [1, 2.5, True, None, {"deep": ["x"]}], "$ref": "#/defs/a", "a.b": {"": 0}},
            "big": 2**63 + 1,
        },
        duration_ms=12.5,
        pod_name="tool-pod-0",
    )

    async def scenario(store: Store) -> None:
        await store.claim_step(step("e-1", 1, owner="oe-1"))
        await store.finish_step("e-1", 1, outcome, at=T0 + 1.5)
        done = await store.get_step("e-1", 1)
        assert done is not None
        assert done == step("e-1", 1, owner="oe-1").model_copy(
            update={"state": "done", "outcome": outcome, "updated_at": T0 + 1.5}
        )
        # A done step is a cached result: neither handed over nor forgotten.
        await store.reset_step("e-1", 1, owner="oe-9", at=T0 + 9)
        await store.delete_step("e-1", 1)
        assert await store.get_step("e-1", 1) == done

        await store.claim_step(step("e-1", 2, owner="oe-1"))
        await store.reset_step("e-1", 2, owner="oe-2", at=T0 + 2)
        reset = await store.get_step("e-1", 2)
        assert reset is not None
        assert (reset.owner, reset.state, reset.updated_at, reset.created_at) == (
            "oe-2",
            "in_progress",
            T0 + 2,
            T0,
        )
        await store.delete_step("e-1", 2)
        assert await store.get_step("e-1", 2) is None
        assert await store.claim_step(step("e-1", 2, owner="oe-3")) is None  # claimable again

        failed = CallOutcome(
            status="error", error=CallError(category="tool_pod_unreachable", status_code=503)
        )
        await store.finish_step("e-1", 2, failed, at=T0 + 3)
        again = await store.get_step("e-1", 2)
        assert again is not None and again.outcome == failed and again.owner == "oe-3"

    backend.run(scenario)


def test_reopen_only_a_held_step_and_only_once(backend: Backend) -> None:
    held = CallOutcome(status="suspend", result={"kind": "approval_required", "args": {"$x": [1, "y"]}})
    ran = CallOutcome(status="success", result={"ok": True})

    async def scenario(store: Store) -> None:
        await store.claim_step(step("e-1", 1, owner="oe-1"))
        assert not await store.reopen_step("e-1", 1, owner="oe-2", run=2, at=T0 + 1)  # still in progress
        await store.finish_step("e-1", 1, held, at=T0 + 1)
        assert await store.reopen_step("e-1", 1, owner="oe-2", run=2, at=T0 + 2)
        reopened = await store.get_step("e-1", 1)
        assert reopened is not None
        # In progress again, with the held payload kept for whoever drives the approved call.
        assert (reopened.state, reopened.owner, reopened.run, reopened.outcome, reopened.updated_at) == (
            "in_progress",
            "oe-2",
            2,
            held,
            T0 + 2,
        )
        assert not await store.reopen_step("e-1", 1, owner="oe-3", run=3, at=T0 + 3)  # only once
        assert await store.claim_step(step("e-1", 1, owner="oe-4")) == reopened
        await store.finish_step("e-1", 1, ran, at=T0 + 4)
        assert not await store.reopen_step("e-1", 1, owner="oe-5", run=4, at=T0 + 5)  # ran: final
        final = await store.get_step("e-1", 1)
        assert final is not None and (final.state, final.outcome, final.run) == ("done", ran, 2)
        assert not await store.reopen_step("e-9", 1, owner="oe-1", run=1, at=T0)  # no such step

    backend.run(scenario)


def test_reviews_and_restarts_round_trip(backend: Backend) -> None:
    review = Review(
        step=3,
        tool="transfer",
        kind="approval_required",
        decision="approved",
        reviewer_notes="ok ☕",
        args={"$amount": 5, "a.b": {"": None}},
        at=T0 + 1,
    )

    async def scenario(store: Store) -> None:
        await store.create_execution(execution("e-1", status=S.SUSPENDED))
        updated = await store.transition(
            "e-1",
            from_states=frozenset({S.SUSPENDED}),
            changes={"status": S.RUNNING, "reviews": [review], "restarts": 2},
        )
        assert updated is not None and updated.reviews == [review] and updated.restarts == 2
        stored = await store.get_execution("e-1")
        assert stored is not None and stored.reviews == [review] and stored.review_at(3) == review
        assert stored.review_at(4) is None

    backend.run(scenario)


def test_a_childs_parent_link_round_trips_and_older_rows_read_without_one(backend: Backend) -> None:
    """agentRef (issue 38): the child's record keeps its parent (a record field on every store, no
    column), a record written without it reads as None, and the start key is claimed once."""
    link = ParentLink(execution_id="e-parent", step=4, agent="team-a/loop", depth=2)

    async def scenario(store: Store) -> None:
        await store.create_execution(execution("e-old"))
        await store.create_execution(execution("e-child").model_copy(update={"parent": link}))
        child, old = await store.get_execution("e-child"), await store.get_execution("e-old")
        assert child is not None and child.parent == link
        assert old is not None and old.parent is None
        moved = await store.transition(
            "e-child", from_states=frozenset({S.PENDING}), changes={"status": S.RUNNING}
        )
        assert moved is not None and moved.parent == link
        # A parent's children, by the index: only those this parent started, newest first.
        second = link.model_copy(update={"step": 5})
        await store.create_execution(execution("e-child-2", at=T0 + 5).model_copy(update={"parent": second}))
        other = link.model_copy(update={"execution_id": "e-other-parent"})
        await store.create_execution(execution("e-stranger").model_copy(update={"parent": other}))
        page = await store.list_executions(parent_execution_id="e-parent")
        assert [r.execution_id for r in page.items] == ["e-child-2", "e-child"]
        running = await store.list_executions(parent_execution_id="e-parent", status=S.RUNNING)
        assert [r.execution_id for r in running.items] == ["e-child"]
        assert (await store.list_executions(parent_execution_id="e-old")).items == []
        assert await store.claim_once("child:e-parent:4", {"execution_id": "e-child"}) is None
        again = await store.claim_once("child:e-parent:4", {"execution_id": "e-other"})
        assert again == {"execution_id": "e-child"}

    backend.run(scenario)


def test_claim_once_first_wins_across_replicas(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        other = backend.make()
        await other.open()
        try:
            await asyncio.gather(warm_up(store), warm_up(other))
            values = [
                {"decision": "approved" if i % 2 else "rejected", "n": i, "$x": {"a.b": [i]}}
                for i in range(20)
            ]
            results = await asyncio.gather(
                *((store if i % 2 else other).claim_once("decision:e-1:0", values[i]) for i in range(20))
            )
        finally:
            await other.close()
        winners = [i for i, result in enumerate(results) if result is None]
        assert len(winners) == 1
        assert all(result == values[winners[0]] for result in results if result is not None)
        assert await store.claim_once("decision:e-1:0", {"late": True}) == values[winners[0]]
        assert await store.claim_once("decision:e-1:1", {"next": 1}) is None  # another key

    backend.run(scenario)


# audit log and events


def test_audit_is_listed_in_append_order(backend: Backend) -> None:
    def audit(execution_id: str, n: int) -> AuditRecord:
        return AuditRecord(
            execution_id=execution_id,
            step=n,
            agent="team-a/echo",
            workspace_id="team-a.echo",
            kind="tool",
            tool="echo_get",
            args={"q": f"Ω {n}", "token": "[REDACTED]"},
            decision="allow",
            route="tool_pod",
            status="success",
            duration_ms=n / 3,
            at=T0 - n,  # clocks may go backwards: the order is still the order appended
        )

    async def scenario(store: Store) -> None:
        for n in range(12):
            await store.append_audit(audit("e-1", n))
            await store.append_audit(audit("e-2", n))
        chain = {"seq", "prev_hash", "hash"}  # the hash chain's links (test_store_ledger.py)
        listed = [a.model_copy(update=dict.fromkeys(chain)) for a in await store.list_audit("e-1")]
        assert listed == [audit("e-1", n) for n in range(12)]
        assert [a.step for a in await store.list_audit("e-2")] == list(range(12))
        assert await store.list_audit("e-3") == []

    backend.run(scenario)


def test_events_number_from_one_without_gaps_under_concurrency(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        first = await store.append_event("e-1", type="step_started", step=1, data={"tool": "x ✓"}, at=T0)
        assert (first.seq, first.type, first.step, first.data, first.at) == (
            1,
            "step_started",
            1,
            {"tool": "x ✓"},
            T0,
        )
        await warm_up(store)
        appended = await asyncio.gather(
            *(store.append_event("e-1", type="tick", step=None, data={"i": i}, at=T0 + i) for i in range(50))
        )
        assert sorted(e.seq for e in appended) == list(range(2, 52))
        listed = await store.list_events("e-1")
        assert [e.seq for e in listed] == list(range(1, 52))
        assert listed[0] == first
        by_i = {e.data["i"]: e for e in listed[1:]}
        assert all(by_i[e.data["i"]] == e for e in appended)
        assert [e.seq for e in await store.list_events("e-1", after_seq=49)] == [50, 51]
        assert await store.list_events("e-1", after_seq=51) == []
        assert [e.seq for e in await store.list_events("e-1", after_seq=0)][:2] == [1, 2]
        other = await store.append_event("e-2", type="completed", step=None, data={}, at=T0)
        assert other.seq == 1

    backend.run(scenario)


def test_events_are_listed_a_page_at_a_time(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        for i in range(7):
            await store.append_event("e-1", type="llm_delta", step=1, data={"i": i}, at=T0)
        assert [e.seq for e in await store.list_events("e-1", limit=3)] == [1, 2, 3]
        assert [e.seq for e in await store.list_events("e-1", after_seq=3, limit=3)] == [4, 5, 6]
        assert [e.seq for e in await store.list_events("e-1", after_seq=6, limit=3)] == [7]
        assert [e.data["i"] for e in await store.list_events("e-1", after_seq=2, limit=None)] == [
            2,
            3,
            4,
            5,
            6,
        ]

    backend.run(scenario)


def test_old_stream_events_are_pruned_but_never_lifecycle_ones_or_an_executions_latest(
    backend: Backend,
) -> None:
    """Retention (issue 32): only stream events stored before the cutoff go, in bounded batches; the
    latest event of an execution stays, so its next seq is still one more than the last."""

    async def scenario(store: Store) -> None:
        for i in range(5):
            await store.append_event("e-1", type="llm_delta", step=1, data={"i": i}, at=T0 + i)
        await store.append_event("e-1", type="step_finished", step=1, data={}, at=T0 + 5)
        await store.append_event("e-1", type="messages", step=None, data={}, at=T0 + 6)
        await store.append_event("e-1", type="completed", step=None, data={}, at=T0 + 7)
        # e-2 ends on an old delta: that one is its latest, so it stays.
        await store.append_event("e-2", type="llm_delta", step=1, data={}, at=T0)
        await store.append_event("e-2", type="llm_delta", step=1, data={}, at=T0 + 1)
        types = frozenset({"llm_delta", "messages"})
        assert await store.prune_events(types=types, before=T0 + 3, limit=2) == 2
        assert await store.prune_events(types=types, before=T0 + 3, limit=100) == 2  # e-1's 3rd, e-2's 1st
        assert [e.seq for e in await store.list_events("e-1")] == [4, 5, 6, 7, 8]
        assert await store.prune_events(types=types, before=T0 + 100, limit=100) == 3
        kept = [(e.seq, e.type) for e in await store.list_events("e-1")]
        assert kept == [(6, "step_finished"), (8, "completed")]
        assert [e.seq for e in await store.list_events("e-2")] == [2]
        assert (await store.append_event("e-2", type="completed", step=None, data={}, at=T0 + 2)).seq == 3
        assert (await store.append_event("e-1", type="note", step=None, data={}, at=T0 + 9)).seq == 9

    backend.run(scenario)


def test_events_from_two_replicas_share_one_sequence(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        other = backend.make()
        await other.open()
        try:
            await asyncio.gather(warm_up(store), warm_up(other))
            appended = await asyncio.gather(
                *(
                    (store if i % 2 else other).append_event("e-1", type="tick", step=i, data={}, at=T0)
                    for i in range(30)
                )
            )
        finally:
            await other.close()
        assert sorted(e.seq for e in appended) == list(range(1, 31))
        assert [e.seq for e in await store.list_events("e-1")] == list(range(1, 31))

    backend.run(scenario)


# SQLite only


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from agent_runtime.oe.store import ExecutionRecord, SqliteStore, StepRecord
    from agent_runtime.protocol import CallOutcome, ExecutionState

    async def main(path):
        store = SqliteStore(path)
        await store.open()
        i = 0
        while True:
            i += 1
            eid = f"e-{i}"
            await store.create_execution(ExecutionRecord(
                execution_id=eid, agent="a/b", project_id="a", workspace_id="a.b", session_id="s",
                created_at=i, updated_at=i))
            await store.claim_step(StepRecord(
                execution_id=eid, step=1, tool="t", fingerprint="f", created_at=i, updated_at=i))
            await store.finish_step(eid, 1, CallOutcome(status="success", result=i), at=i)
            await store.append_event(eid, type="step_finished", step=1, data={"i": i}, at=i)
            await store.transition(eid, from_states=frozenset({ExecutionState.PENDING}),
                                   changes={"status": ExecutionState.RUNNING})
            print(i, flush=True)

    asyncio.run(main(sys.argv[1]))
    """
)


def test_sqlite_keeps_every_acknowledged_write_across_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "oe.db"
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert writer.stdout is not None
        for _ in range(300):  # let it get well into its stride, then kill it mid-write
            line = writer.stdout.readline()
            assert line, writer.stderr.read() if writer.stderr else ""
        os.killpg(writer.pid, signal.SIGKILL)
        rest = writer.stdout.read()
    finally:
        if writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)
    assert writer.returncode == -signal.SIGKILL
    acked = int(([line for line in rest.splitlines() if line.strip()] or [line])[-1])
    assert acked >= 300

    async def check(store: Store) -> None:
        for i in range(1, acked + 1):
            record = await store.get_execution(f"e-{i}")
            assert record is not None and record.status == S.RUNNING, i
            done = await store.get_step(f"e-{i}", 1)
            assert done is not None and done.outcome == CallOutcome(status="success", result=i), i
            assert [e.data for e in await store.list_events(f"e-{i}")] == [{"i": i}], i

    Backend("sqlite", lambda: SqliteStore(path)).run(check)


def test_sqlite_lists_from_indexes(tmp_path: Path) -> None:
    """10,000 executions: each listing walks an index in order (no sort of the whole table), so a page
    costs its own size in memory, not the table's."""
    path = tmp_path / "oe.db"

    async def fill(store: Store) -> tuple[list[str], int]:
        await asyncio.gather(
            *(
                store.create_execution(execution(f"e-{i:05d}", agent=f"ns/a{i % 7}", at=T0 + i // 3))
                for i in range(10_000)
            )
        )
        page = await store.list_executions(limit=5, agent="ns/a3")
        deep = await store.list_executions(limit=500, agent="ns/a3", cursor=page.next_cursor)
        return [r.execution_id for r in page.items + deep.items], await store.count_executions()

    ids, count = Backend("sqlite", lambda: SqliteStore(path)).run(fill)
    assert count == 10_000
    expected = sorted((f"e-{i:05d}" for i in range(10_000) if i % 7 == 3), key=lambda e: (int(e[2:]) // 3, e))
    assert ids == expected[::-1][:505]

    db = sqlite3.connect(path)
    try:
        for where in ("", "WHERE agent = 'x'", "WHERE status = 'x'", "WHERE agent = 'x' AND status = 'x'"):
            cursor = (
                f"{'AND' if where else 'WHERE'} (created_at < 1 OR (created_at = 1 AND execution_id < 'x'))"
            )
            for clause in (where, f"{where} {cursor}"):
                plan = db.execute(
                    f"EXPLAIN QUERY PLAN SELECT record FROM executions {clause} "  # noqa: S608 (fixed test text)
                    "ORDER BY created_at DESC, execution_id DESC LIMIT 6"
                ).fetchall()
                details = " | ".join(str(row[-1]) for row in plan)
                assert "TEMP B-TREE" not in details and "INDEX" in details, (clause, details)
        # An agentRef parent's children (issue 38): by their own index, whatever the table holds.
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT record FROM executions "
            "WHERE json_extract(record, '$.parent.execution_id') = 'x'"
        ).fetchall()
        assert "executions_by_parent" in " | ".join(str(row[-1]) for row in plan), plan
    finally:
        db.close()


# drains and interrupts the OE delivers, and the runtimes that served each execution


def delivery(key: str, *, due: float = T0, state: str = "open", **extra: Any) -> DeliveryRecord:
    return DeliveryRecord(
        key=key,
        kind="drain",
        execution_id=key.split(":")[1],
        agent="team-a/echo",
        workspace_id="team-a.echo",
        request_id=f"req-{key}",
        reason="cancelled by the client",
        deadline_at_ms=1_760_000_060_123,
        state=state,  # type: ignore[arg-type]
        targets=[DeliveryTarget(component="aer", address="http://10.0.0.7:8001", pod_name="aer-0")],
        created_at=T0,
        retry_until=T0 + 900,
        due=due,
        updated_at=T0,
        **extra,
    )


def test_delivery_is_created_once_and_replaced_by_compare_and_set(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        first = delivery("drain:e-1")
        assert await store.create_delivery(first) is None
        again = await store.create_delivery(delivery("drain:e-1", due=T0 + 5))
        assert again == first  # one drain per execution: the existing record, unchanged
        assert await store.get_delivery("drain:e-1") == first
        assert await store.get_delivery("drain:nobody") is None

        answered = first.model_copy(deep=True)
        answered.targets[0].outcome, answered.targets[0].final = "completed", True
        answered.state, answered.due = "quiet", T0 + 1.5
        stored = await store.replace_delivery(answered)
        assert stored is not None and stored.version == 1
        assert await store.replace_delivery(answered) is None  # stale: version 0 is gone
        assert await store.get_delivery("drain:e-1") == stored
        assert (await store.get_delivery("drain:e-1")).targets[0].outcome == "completed"  # type: ignore[union-attr]

    backend.run(scenario)

    async def reopened(store: Store) -> DeliveryRecord | None:
        return await store.get_delivery("drain:e-1")

    kept = backend.run(reopened)  # another store on the same data, as a restarted OE
    assert kept is not None and (kept.version, kept.state, kept.request_id) == (1, "quiet", "req-drain:e-1")


def test_open_deliveries_are_listed_soonest_due_first(backend: Backend) -> None:
    async def scenario(store: Store) -> list[list[str]]:
        for key, due, state in [
            ("drain:late", T0 + 30, "open"),
            ("drain:now", T0, "open"),
            ("drain:done", T0 - 5, "quiet"),
            ("interrupt:x:3", T0 + 10, "open"),
        ]:
            assert await store.create_delivery(delivery(key, due=due, state=state)) is None
        closing = await store.get_delivery("drain:late")
        assert closing is not None
        assert await store.replace_delivery(closing.model_copy(update={"state": "unconfirmed"})) is not None
        return [
            [record.key for record in await store.list_deliveries()],
            [record.key for record in await store.list_deliveries(due_by=T0 + 10)],
            [record.key for record in await store.list_deliveries(due_by=T0 - 1)],
            [record.key for record in await store.list_deliveries(limit=1)],
        ]

    assert backend.run(scenario) == [
        ["drain:now", "interrupt:x:3"],
        ["drain:now", "interrupt:x:3"],
        [],
        ["drain:now"],
    ]


def test_concurrent_replacements_exactly_one_wins(backend: Backend) -> None:
    async def scenario(store: Store) -> list[DeliveryRecord | None]:
        record = delivery("drain:e-race")
        await store.create_delivery(record)
        await warm_up(store)
        return await asyncio.gather(
            *(store.replace_delivery(record.model_copy(update={"reason": f"writer {i}"})) for i in range(20))
        )

    results = backend.run(scenario)
    assert sum(result is not None for result in results) == 1


def test_served_runtimes_are_noted_once_in_order(backend: Backend) -> None:
    def runtime(execution_id: str, component: str, address: str, pod: str) -> ServedRuntime:
        return ServedRuntime(
            execution_id=execution_id,
            component=component,  # type: ignore[arg-type]
            address=address,
            pod_name=pod,
            at=T0,
        )

    async def scenario(store: Store) -> tuple[list[bool], list[ServedRuntime], list[ServedRuntime]]:
        aer = runtime("e-1", "aer", "http://10.0.0.7:8001", "agent-aer-0")
        tool_a = runtime("e-1", "tool", "http://10.0.0.8:8002", "agent-tool-a")
        tool_b = runtime("e-1", "tool", "http://[fd00::9]:8002", "agent-tool-b")
        other = runtime("e-2", "tool", "http://10.0.0.8:8002", "agent-tool-a")
        noted = [await store.note_runtime(r) for r in (aer, tool_a, tool_a, tool_b, aer, other)]
        return noted, await store.list_runtimes("e-1"), await store.list_runtimes("e-3")

    noted, listed, nothing = backend.run(scenario)
    assert noted == [True, True, False, True, False, True]
    assert [(r.component, r.address, r.pod_name) for r in listed] == [
        ("aer", "http://10.0.0.7:8001", "agent-aer-0"),
        ("tool", "http://10.0.0.8:8002", "agent-tool-a"),
        ("tool", "http://[fd00::9]:8002", "agent-tool-b"),
    ]
    assert nothing == []
