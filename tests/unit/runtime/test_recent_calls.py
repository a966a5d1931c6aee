"""servers/recent_calls.py: a resent call runs once; what is kept once calls finish is bounded by count and
by bytes, and holds the outcome's JSON, not the task."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_runtime.protocol import CallOutcome
from agent_runtime.servers.recent_calls import RecentCalls


def _outcome(text: str) -> CallOutcome:
    return CallOutcome(status="success", result={"text": text}, pod_name="tool-0")


async def _call(
    recent: RecentCalls, step: int, ran: list[int], *, text: str = "ok", body: bytes = b"{}"
) -> Any:
    async def run() -> CallOutcome:
        ran.append(step)
        await asyncio.sleep(0)
        return _outcome(text)

    return await recent.once(route="/execute", execution_id="e1", step=step, body=body, run=run)


def test_a_resent_call_is_answered_from_the_kept_json_and_does_not_run_again() -> None:
    async def main() -> None:
        recent, ran = RecentCalls(), []
        first = await _call(recent, 1, ran, text="stored once")
        again = await _call(recent, 1, ran, text="would store twice")
        assert ran == [1] and again == first and recent.replayed == 1
        assert recent.outcome_bytes == len(first.model_dump_json())
        changed = await _call(recent, 1, ran, text="another call", body=b'{"other": 1}')
        assert ran == [1, 1] and changed.result == {"text": "another call"}

    asyncio.run(main())


def test_a_call_sent_again_while_it_runs_joins_it() -> None:
    async def main() -> None:
        recent, ran, gate = RecentCalls(), [], asyncio.Event()

        async def run() -> CallOutcome:
            ran.append(1)
            await gate.wait()
            return _outcome("joined")

        first = asyncio.create_task(
            recent.once(route="/execute", execution_id="e1", step=1, body=b"", run=run)
        )
        await asyncio.sleep(0)
        second = asyncio.create_task(
            recent.once(route="/execute", execution_id="e1", step=1, body=b"", run=run)
        )
        await asyncio.sleep(0)
        gate.set()
        assert (await first) == (await second) and ran == [1]

    asyncio.run(main())


def test_kept_outcomes_are_bounded_by_bytes_as_well_as_by_count() -> None:
    async def main() -> None:
        big = "x" * 10_000
        recent, ran = RecentCalls(max_entries=100, max_bytes=50_000), []
        for step in range(1, 21):
            await _call(recent, step, ran, text=big)
        assert recent.outcome_bytes <= 50_000 and len(recent) == 4  # the newest four of 20 KB-sized ones
        await _call(recent, 20, ran, text=big)
        assert ran.count(20) == 1  # the newest is still answered from memory
        small = RecentCalls(max_entries=3)
        for step in range(1, 11):
            await _call(small, step, [])
        assert len(small) == 3

    asyncio.run(main())


def test_entries_expire_after_the_ttl() -> None:
    async def main() -> None:
        now = [0.0]
        recent, ran = RecentCalls(ttl_s=10, clock=lambda: now[0]), []
        await _call(recent, 1, ran)
        now[0] = 11.0
        await _call(recent, 2, ran)
        assert len(recent) == 1
        await _call(recent, 1, ran)
        assert ran == [1, 2, 1]  # forgotten: a resend this late runs again

    asyncio.run(main())
