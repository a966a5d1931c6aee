"""Extractive summaries of episode windows."""

from __future__ import annotations

from agent_runtime.memory.records import MemoryRecord
from agent_runtime.memory.summary import highlights, summarize
from agent_runtime.memory.wire import Kind

T0 = 1_760_000_000.0


def event(i: int, text: str, role: str = "user") -> MemoryRecord:
    return MemoryRecord(
        id=f"e{i}",
        kind=Kind.EPISODIC,
        workspace_id="w",
        namespace="n",
        content=text,
        metadata={},
        created_at=T0,
        updated_at=T0,
        session_id="s",
        role=role,
        occurred_at=T0 + i,
    )


EVENTS = [
    event(0, "hi"),
    event(1, "my refund for the broken kettle has not arrived", "user"),
    event(2, "the refund for the kettle was sent on Monday", "assistant"),
    event(3, "ok"),
    event(4, "when will the kettle refund reach my account?"),
]


def test_highlights_pick_the_recurring_topic_in_time_order() -> None:
    picked = highlights(EVENTS, count=2)
    assert [e.id for e in picked] == sorted(e.id for e in picked)
    assert all("refund" in e.content for e in picked)


def test_summary_text_states_window_roles_topics() -> None:
    picked, text = summarize(EVENTS, session_id="s", count=3)
    assert len(picked) == 3
    assert text.startswith("5 events in session s from 2025-10-09T08:53:20Z to 2025-10-09T08:53:24Z")
    assert "user: 4" in text and "assistant: 1" in text
    assert "refund" in text.split("Main topics:")[1].split("\n")[0]


def test_empty_window() -> None:
    assert summarize([], session_id="s", count=3) == ([], "No events in session s in this window.")
