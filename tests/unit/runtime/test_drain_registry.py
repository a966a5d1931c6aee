"""The receivers' drain and interrupt logic (`servers/drain.py`), on real asyncio tasks and real threads."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.to_thread
import pytest

from agent_runtime.sdk.tracking import CallInterrupted, ExecutionDraining
from agent_runtime.servers.drain import (
    DeadlineTooFar,
    DrainSettings,
    DrainSettingsError,
    PodIdentity,
    RequestIdConflict,
    WorkRegistry,
    WorkspaceMismatch,
    WorkspaceMissing,
    check_workspace,
)


class Clock:
    """A monotonic clock the test moves by hand (TTLs); wall time stays real (deadlines)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(scenario())


async def hold(release: asyncio.Event) -> str:
    await release.wait()
    return "done"


async def until(predicate: Callable[[], bool], within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.005)


def drain(registry: WorkRegistry, execution_id: str, *, request_id: str = "r-1", in_ms: int = 5000) -> Any:
    return registry.drain(
        request_id=request_id, execution_id=execution_id, reason="cancelled", deadline_at_ms=now_ms() + in_ms
    )


# drain -------------------------------------------------------------------------------------------------


def test_cooperative_calls_are_cancelled_and_the_drain_completes() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        release = asyncio.Event()
        calls = [
            asyncio.create_task(registry.run(registry.admit("e-1", step, cancellable=True), hold(release)))
            for step in (1, 2, 3)
        ]
        await asyncio.sleep(0)
        assert drain(registry, "e-1") == ("accepted", None)
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, CallInterrupted) and r.category == "execution_drained" for r in results)
        await until(lambda: drain(registry, "e-1")[0] != "accepted")
        assert drain(registry, "e-1") == ("completed", None)

    run(scenario)


def test_an_idle_execution_it_served_completes_at_once() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        ticket = registry.admit("e-1", 1, cancellable=True)
        assert await registry.run(ticket, asyncio.sleep(0, result="x")) == "x"
        assert drain(registry, "e-1") == ("completed", None)

    run(scenario)


def test_never_served_is_delivery_failed_and_latches() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        assert drain(registry, "ghost") == ("delivery_failed", "execution_not_found")
        assert drain(registry, "ghost") == ("delivery_failed", "execution_not_found")
        with pytest.raises(ExecutionDraining):
            registry.admit("ghost", 1, cancellable=True)

    run(scenario)


def test_admission_is_refused_once_a_drain_is_accepted() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        release = asyncio.Event()
        call = asyncio.create_task(registry.run(registry.admit("e-1", 1, cancellable=True), hold(release)))
        await asyncio.sleep(0)
        drain(registry, "e-1")
        with pytest.raises(ExecutionDraining) as refused:
            registry.admit("e-1", 2, cancellable=True)
        assert refused.value.category == "execution_draining"
        registry.admit("e-2", 1, cancellable=True)  # other executions are not touched
        with pytest.raises(CallInterrupted):
            await call

    run(scenario)


def test_a_call_admitted_but_not_started_never_runs_once_drained() -> None:
    """DR-13: the drain races a call that is just starting; it never says completed while the call runs."""

    async def scenario() -> None:
        registry = WorkRegistry()
        ran = []
        ticket = registry.admit("e-1", 1, cancellable=False)  # registered, its work not created yet
        assert drain(registry, "e-1") == ("accepted", None)

        async def body() -> None:
            ran.append(True)

        with pytest.raises(CallInterrupted):
            await registry.run(ticket, body())
        assert ran == []
        await until(lambda: drain(registry, "e-1")[0] == "completed")

    run(scenario)


def test_idempotent_on_request_id_and_one_drain_per_execution() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        release = asyncio.Event()
        call = asyncio.create_task(registry.run(registry.admit("e-1", 1, cancellable=True), hold(release)))
        await asyncio.sleep(0)
        assert drain(registry, "e-1", request_id="r-1") == ("accepted", None)
        assert drain(registry, "e-1", request_id="r-1") == ("accepted", None)
        # Another request_id gets the record there is; no second drain starts.
        assert drain(registry, "e-1", request_id="r-2") == ("accepted", None)
        with pytest.raises(CallInterrupted):
            await call
        await until(lambda: drain(registry, "e-1", request_id="r-1")[0] == "completed")
        assert drain(registry, "e-1", request_id="r-2") == ("completed", None)
        with pytest.raises(RequestIdConflict):
            drain(registry, "e-2", request_id="r-1")

    run(scenario)


def test_deadline_too_far_is_refused_and_nothing_is_recorded() -> None:
    async def scenario() -> None:
        registry = WorkRegistry(settings=DrainSettings(max_deadline_ms=1000))
        registry.admit("e-1", 1, cancellable=True)
        with pytest.raises(DeadlineTooFar) as refused:
            drain(registry, "e-1", in_ms=5000)
        assert refused.value.max_ms == 1000
        registry.admit("e-1", 2, cancellable=True)  # not draining: the refusal changed nothing
        assert drain(registry, "e-1", in_ms=900) == ("accepted", None)

    run(scenario)


def test_a_deadline_in_the_past_cancels_at_once_and_times_out_what_was_in_flight() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        release = asyncio.Event()
        call = asyncio.create_task(registry.run(registry.admit("e-1", 1, cancellable=True), hold(release)))
        await asyncio.sleep(0)
        assert drain(registry, "e-1", in_ms=-10) == ("timed_out", None)
        with pytest.raises(CallInterrupted):
            await call
        assert drain(registry, "e-1") == ("timed_out", None)

    run(scenario)


def test_a_sync_body_is_never_cancelled_and_settles_the_drain_when_its_thread_ends() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        gate = threading.Event()
        ticket = registry.admit("e-1", 1, cancellable=False)
        call = asyncio.create_task(registry.run(ticket, anyio.to_thread.run_sync(lambda: gate.wait(10))))
        await until(lambda: ticket.task is not None)
        assert drain(registry, "e-1") == ("accepted", None)
        await asyncio.sleep(0.05)
        assert drain(registry, "e-1") == ("accepted", None)  # the thread still runs: not quiet
        assert not call.done()
        gate.set()
        assert await call is True  # it ran to its end and its caller gets its real result
        await until(lambda: drain(registry, "e-1")[0] != "accepted")
        assert drain(registry, "e-1") == ("completed", None)

    run(scenario)


def test_a_sync_body_outliving_the_deadline_is_timed_out_and_the_deadline_never_moves() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        gate = threading.Event()
        ticket = registry.admit("e-1", 1, cancellable=False)
        call = asyncio.create_task(registry.run(ticket, anyio.to_thread.run_sync(lambda: gate.wait(10))))
        await until(lambda: ticket.task is not None)
        started = time.monotonic()
        assert drain(registry, "e-1", in_ms=200) == ("accepted", None)
        # A retry carrying a later deadline re-reads the record; the first deadline stands.
        assert drain(registry, "e-1", in_ms=10_000) == ("accepted", None)
        await until(lambda: drain(registry, "e-1", in_ms=10_000)[0] != "accepted")
        assert time.monotonic() - started < 2.0
        assert drain(registry, "e-1") == ("timed_out", None)
        assert registry.in_flight("e-1") == 1  # honestly still running
        gate.set()
        await call
        assert registry.in_flight("e-1") == 0

    run(scenario)


def test_a_cancelled_caller_does_not_make_a_sync_body_look_finished() -> None:
    """A timeout (or the AER turn's own drain) cancels the awaiting caller; the thread is still tracked."""

    async def scenario() -> None:
        registry = WorkRegistry()
        gate = threading.Event()
        ticket = registry.admit("e-1", 1, cancellable=False)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await registry.run(ticket, anyio.to_thread.run_sync(lambda: gate.wait(10)))
        assert registry.in_flight("e-1") == 1
        assert drain(registry, "e-1") == ("accepted", None)
        gate.set()
        await until(lambda: drain(registry, "e-1")[0] == "completed")

    run(scenario)


def test_finished_records_are_forgotten_after_the_ttl() -> None:
    async def scenario() -> None:
        clock = Clock()
        registry = WorkRegistry(settings=DrainSettings(record_ttl_s=900), clock=clock)
        ticket = registry.admit("e-1", 1, cancellable=True)
        await registry.run(ticket, asyncio.sleep(0))
        assert drain(registry, "e-1") == ("completed", None)
        clock.now += 899
        assert drain(registry, "e-1") == ("completed", None)
        clock.now += 2
        assert drain(registry, "e-1") == ("delivery_failed", "execution_not_found")
        assert len(registry) == 1  # that late resend is itself recorded, and forgotten in turn
        clock.now += 901
        registry.admit("e-9", 1, cancellable=True)
        assert len(registry) == 1

    run(scenario)


def test_an_execution_with_work_in_flight_is_never_forgotten() -> None:
    async def scenario() -> None:
        clock = Clock()
        registry = WorkRegistry(settings=DrainSettings(record_ttl_s=1), clock=clock)
        release = asyncio.Event()
        call = asyncio.create_task(registry.run(registry.admit("e-1", 1, cancellable=True), hold(release)))
        await asyncio.sleep(0)
        clock.now += 100
        assert registry.interrupt("e-1", 7) == "interrupted"  # known: step 7 is kept for its attach
        release.set()
        await call

    run(scenario)


def test_the_aer_turn_is_cancelled_by_a_drain() -> None:
    async def scenario() -> None:
        registry = WorkRegistry(bounded_by_life=True)
        release = asyncio.Event()
        turn = registry.admit("e-1", None, cancellable=True)
        task = asyncio.create_task(hold(release))
        registry.attach(turn, task)
        assert drain(registry, "e-1") == ("accepted", None)
        assert registry.draining("e-1") == "cancelled"
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: drain(registry, "e-1")[0] == "completed")

    run(scenario)


# interrupt ---------------------------------------------------------------------------------------------


def test_interrupt_cancels_exactly_one_call_and_later_calls_proceed() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        release = asyncio.Event()
        one = asyncio.create_task(registry.run(registry.admit("e-1", 1, cancellable=True), hold(release)))
        two = asyncio.create_task(registry.run(registry.admit("e-1", 2, cancellable=True), hold(release)))
        await asyncio.sleep(0)
        assert registry.interrupt("e-1", 1) == "interrupted"
        with pytest.raises(CallInterrupted) as stopped:
            await one
        assert stopped.value.category == "interrupted"
        assert registry.interrupt("e-1", 1) == "already_settled"
        release.set()
        assert await two == "done"
        # No admission latch, ever (IC-08).
        three = registry.admit("e-1", 3, cancellable=True)
        assert await registry.run(three, asyncio.sleep(0, result=3)) == 3

    run(scenario)


def test_interrupt_of_a_sync_body_is_not_cancellable_and_it_keeps_running() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        gate = threading.Event()
        ticket = registry.admit("e-1", 1, cancellable=False)
        call = asyncio.create_task(registry.run(ticket, anyio.to_thread.run_sync(lambda: gate.wait(10))))
        await until(lambda: ticket.task is not None)
        assert registry.interrupt("e-1", 1) == "not_cancellable"
        gate.set()
        assert await call is True

    run(scenario)


def test_interrupt_not_found_and_already_settled() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        assert registry.interrupt("ghost", 1) == "not_found"
        for step in (1, 2, 3):
            await registry.run(registry.admit("e-1", step, cancellable=True), asyncio.sleep(0))
        assert registry.interrupt("e-1", 2) == "already_settled"
        assert registry.interrupt("e-1", 0) == "not_found"  # below every settled step: never coming

    run(scenario)


def test_an_interrupt_before_attach_fires_on_attach_and_nothing_runs() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        await registry.run(registry.admit("e-1", 1, cancellable=True), asyncio.sleep(0))
        assert registry.interrupt("e-1", 2) == "interrupted"
        ran = []

        async def body() -> None:
            ran.append(True)

        with pytest.raises(CallInterrupted):
            await registry.run(registry.admit("e-1", 2, cancellable=False), body())
        assert ran == []
        # Fired once: the next call at another step runs.
        assert await registry.run(registry.admit("e-1", 3, cancellable=True), asyncio.sleep(0, "ok")) == "ok"

    run(scenario)


def test_a_kept_interrupt_expires() -> None:
    async def scenario() -> None:
        clock = Clock()
        registry = WorkRegistry(clock=clock, pending_interrupt_ttl_s=30)
        await registry.run(registry.admit("e-1", 1, cancellable=True), asyncio.sleep(0))
        assert registry.interrupt("e-1", 2) == "interrupted"
        clock.now += 31
        assert (
            await registry.run(registry.admit("e-1", 2, cancellable=True), asyncio.sleep(0, "ran")) == "ran"
        )

    run(scenario)


def test_on_the_aer_an_interrupt_waits_for_a_call_only_within_the_execution_life() -> None:
    async def scenario() -> None:
        registry = WorkRegistry(bounded_by_life=True)
        release = asyncio.Event()
        turn = registry.admit("e-1", None, cancellable=True)
        task = asyncio.create_task(hold(release))
        registry.attach(turn, task)
        assert registry.interrupt("e-1", 1) == "interrupted"  # the turn runs: step 1 may still come
        release.set()
        await task
        await asyncio.sleep(0)
        assert registry.interrupt("e-1", 2) == "not_found"  # the turn ended: no call is coming

    run(scenario)


def test_no_interrupt_is_kept_for_a_draining_execution() -> None:
    async def scenario() -> None:
        registry = WorkRegistry()
        await registry.run(registry.admit("e-1", 1, cancellable=True), asyncio.sleep(0))
        drain(registry, "e-1")
        assert registry.interrupt("e-1", 2) == "not_found"

    run(scenario)


# settings, identity, workspace ------------------------------------------------------------------------


def test_drain_settings_from_env() -> None:
    assert DrainSettings.from_env({}) == DrainSettings(max_deadline_ms=60_000, record_ttl_s=900)
    settings = DrainSettings.from_env(
        {"RUNNER_DRAIN_MAX_DEADLINE_MS": " 30000 ", "RUNNER_DRAIN_RECORD_TTL_S": "1200"}
    )
    assert settings == DrainSettings(max_deadline_ms=30_000, record_ttl_s=1200)
    for name in ("RUNNER_DRAIN_MAX_DEADLINE_MS", "RUNNER_DRAIN_RECORD_TTL_S"):
        for bad in ("0", "-5", "1.5", "soon"):
            with pytest.raises(DrainSettingsError, match=name):
                DrainSettings.from_env({name: bad})


def test_pod_identity() -> None:
    env = {"HOSTNAME": "agent-tool-7c9f-abcde", "RUNNER_POD_IP": "10.1.2.3"}
    assert PodIdentity.from_env(env, host="::", port=8002) == PodIdentity(
        name="agent-tool-7c9f-abcde", address="http://10.1.2.3:8002"
    )
    assert PodIdentity.from_env({"RUNNER_POD_IP": "fd00::7"}, host="::", port=8001).address == (
        "http://[fd00::7]:8001"
    )
    assert PodIdentity.from_env({}, host="0.0.0.0", port=9000).address == "http://127.0.0.1:9000"
    assert PodIdentity.from_env({}, host="127.0.0.1", port=9000) == PodIdentity(
        name=None, address="http://127.0.0.1:9000"
    )
    with pytest.raises(DrainSettingsError, match="RUNNER_POD_IP"):
        PodIdentity.from_env({"RUNNER_POD_IP": "pod.example"}, host="::", port=8002)


def test_workspace_check() -> None:
    check_workspace(None, None)
    check_workspace(None, "anything")  # unmanaged: not checked
    check_workspace("team-a.echo", "team-a.echo")
    with pytest.raises(WorkspaceMissing):
        check_workspace("team-a.echo", None)
    with pytest.raises(WorkspaceMissing):
        check_workspace("team-a.echo", "")
    for other in ("team-a.Echo", "team-a.echo ", "team-b.echo"):
        with pytest.raises(WorkspaceMismatch):
            check_workspace("team-a.echo", other)
