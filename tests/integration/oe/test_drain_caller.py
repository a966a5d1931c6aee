"""The OE's drain records on each store backend: one per execution, reopened by a runtime that answers
later, and recovered after a restart that lost the write (no runtime is reached here: nothing served)."""

from __future__ import annotations

from typing import Any

from agent_runtime.oe.drains import DrainCaller
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.store import ExecutionRecord, Store, drain_key
from agent_runtime.protocol import ExecutionState
from tests.integration.stores import Backend

NOW = 1_760_000_000.0
REG = AgentRegistration(
    agent="team-a/echo", token="drain-test-token", aer_url="http://127.0.0.1:9", tool_url="http://127.0.0.1:9"
)


class Registry:
    def get(self, agent: str) -> AgentRegistration | None:
        return REG if agent == REG.agent else None


def cancelled(execution_id: str, **fields: Any) -> ExecutionRecord:
    fields.setdefault("finished_at", NOW)
    return ExecutionRecord(
        execution_id=execution_id,
        agent="team-a/echo",
        project_id="team-a",
        workspace_id="team-a.echo",
        session_id="s",
        status=ExecutionState.CANCELLED,
        created_at=NOW - 10,
        updated_at=NOW,
        **fields,
    )


def caller(store: Store, clock: list[float]) -> DrainCaller:
    return DrainCaller(store=store, registry=Registry(), clock=lambda: clock[0])


def test_one_drain_per_execution_and_a_late_runtime_reopens_it(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        clock = [NOW]
        drains = caller(store, clock)
        execution = cancelled("e-1")
        first = await drains.drain(execution, reason="cancelled by the client")
        again = await drains.drain(execution, reason="again")
        assert again.request_id == first.request_id and again.deadline_at_ms == first.deadline_at_ms
        assert first.deadline_at_ms == int((NOW + 30) * 1000) and first.retry_until == NOW + 900
        # Nothing served it yet: quiet at once.
        ended = await drains.deliver(first)
        assert (ended.state, ended.outcome, ended.targets) == ("quiet", "completed", [])

        # A Tool Pod answers a call of it afterwards (another replica's call, say): the drain opens again.
        clock[0] += 5
        await drains.served("e-1", "tool", pod_name="tool-b", address="http://127.0.0.1:9", fallback="x")
        reopened = await store.get_delivery(drain_key("e-1"))
        assert reopened is not None and (reopened.state, reopened.due) == ("open", NOW + 5)
        # Its pod cannot be reached: the attempt says so and is retried, same request, same deadline.
        tried = await drains.deliver(reopened)
        assert tried.state == "open" and tried.request_id == first.request_id
        [tool] = tried.targets
        assert (tool.pod_name, tool.attempts, tool.final) == ("tool-b", 1, False)
        assert tool.problem and tool.problem.startswith("Client")
        # Noted once: the same pod again writes nothing and reopens nothing.
        await drains.served("e-1", "tool", pod_name="tool-b", address="http://127.0.0.1:9", fallback="x")
        assert (await store.list_runtimes("e-1"))[0].pod_name == "tool-b"
        assert len(await store.list_runtimes("e-1")) == 1
        await drains.aclose()

    backend.run(scenario)


def test_an_address_that_is_not_a_base_url_is_replaced_by_the_service(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        drains = caller(store, [NOW])
        await drains.served(
            "e-2", "aer", pod_name="p", address="http://u:pw@10.0.0.1:8001/x", fallback=REG.aer_url
        )
        await drains.served("e-2", "tool", pod_name=None, address=None, fallback=REG.tool_url)
        assert [(r.component, r.address) for r in await store.list_runtimes("e-2")] == [
            ("aer", REG.aer_url),
            ("tool", REG.tool_url),
        ]

    backend.run(scenario)


def test_a_cancel_whose_drain_was_never_written_gets_one_after_a_restart(backend: Backend) -> None:
    async def scenario(store: Store) -> None:
        await store.create_execution(cancelled("e-lost"))
        await store.create_execution(cancelled("e-old", finished_at=NOW - 3600))  # its window has passed
        await caller(store, [NOW]).recover()
        recovered = await store.get_delivery(drain_key("e-lost"))
        assert recovered is not None and recovered.open
        assert await store.get_delivery(drain_key("e-old")) is None

    backend.run(scenario)
