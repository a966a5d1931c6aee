"""Extractive summaries of an episode window: the Memory server has no model of its own to write one
(its trust boundary reaches only its store), so it picks the events that carry the window's most frequent
words and states counts, roles and the time range. An agent that wants prose passes these to its LLM."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from agent_runtime.memory.records import MemoryRecord

HIGHLIGHT_CHARS = 280
TOPIC_WORDS = 8
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_STOPWORDS = frozenset(
    " ".join(
        (
            "the and for are but not you your with this that have has had was were will would can could",
            "should from they them their there what when where which who why how all any our out about into",
            "than then its also just been being some such only very more most other over here did does done",
        )
    ).split(" ")
)


def _words(text: str) -> set[str]:
    return {word for word in (w.lower() for w in _WORD.findall(text)) if word not in _STOPWORDS}


def _at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= HIGHLIGHT_CHARS else text[: HIGHLIGHT_CHARS - 1] + "…"


def highlights(events: Sequence[MemoryRecord], *, count: int) -> list[MemoryRecord]:
    """The `count` events whose words recur most across the window, in time order."""
    words = [_words(event.content) for event in events]
    frequency = Counter(word for event_words in words for word in event_words)
    scored = [
        (sum(frequency[w] for w in event_words) / (1 + len(event_words)) ** 0.5, -i)
        for i, event_words in enumerate(words)
    ]
    best = sorted(range(len(events)), key=lambda i: scored[i], reverse=True)[:count]
    return [events[i] for i in sorted(best)]


def summarize(
    events: Sequence[MemoryRecord], *, session_id: str, count: int
) -> tuple[list[MemoryRecord], str]:
    """The highlights and a short text naming the window, its roles, its topics and its highlights."""
    if not events:
        return [], f"No events in session {session_id} in this window."
    picked = highlights(events, count=count)
    roles = Counter(event.role or "unknown" for event in events)
    topics = Counter(word for event in events for word in _words(event.content)).most_common(TOPIC_WORDS)
    first = events[0].occurred_at or events[0].created_at
    last = events[-1].occurred_at or events[-1].created_at
    lines = [
        f"{len(events)} events in session {session_id} from {_at(first)} to {_at(last)} "
        f"({', '.join(f'{role}: {n}' for role, n in roles.most_common())}).",
    ]
    if topics:
        lines.append(f"Main topics: {', '.join(word for word, _ in topics)}.")
    lines.append("Highlights:")
    lines += [f"- [{event.role or 'event'}] {_clip(event.content)}" for event in picked]
    return picked, "\n".join(lines)
