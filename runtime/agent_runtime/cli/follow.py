"""How `invoke --follow` and `events -w` show an execution's events to a person, one event at a time.

Each step as the OE routes it (`step_started`: the tool and its route; `step_finished`: its status and
whether the answer was replayed from the OE's cache), the suspension and the end. `llm_delta` events (the
model's text as it streams) are written as they come, on one line, without a newline between deltas; the
next other event starts a fresh line. Pure: `Renderer.feed` returns the text to write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DELTA = "llm_delta"


def _short(value: Any, *, width: int = 160) -> str:
    shown = json.dumps(value, separators=(",", ":")) if value else ""
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def describe(event: dict[str, Any]) -> str:
    """One event for people: seq, type, step, and what matters of its data."""
    kind = str(event.get("type", ""))
    data = event.get("data") or {}
    step = f" step {event['step']}" if event.get("step") is not None else ""
    head = f"{event.get('seq', ''):>4} {kind}{step}"
    if kind == "step_started":
        extra = " (approved)" if data.get("approved") else ""
        return f"{head} {data.get('tool', '')} via {data.get('route', '?')}{extra}"
    if kind == "step_finished":
        cached = " (cached)" if data.get("from_cache") else ""
        category = f" [{data['error_category']}]" if data.get("error_category") else ""
        return f"{head} {data.get('tool', '')} {data.get('status', '')}{category}{cached}"
    if kind == "suspended":
        asks = (data.get("suspension") or {}).get("metadata") or data.get("suspension") or {}
        tool = asks.get("tool") if isinstance(asks, dict) else None
        return f"{head} waiting for review" + (f" of {tool}" if tool else "")
    return f"{head} {_short(data)}".rstrip()


def delta_text(event: dict[str, Any]) -> str:
    """The text an `llm_delta` event carries (`data.text`, else `data.delta`), empty when none."""
    data = event.get("data") or {}
    for key in ("text", "delta", "content"):
        if isinstance(data.get(key), str):
            return str(data[key])
    return ""


@dataclass
class Renderer:
    """Turns events into terminal text; remembers whether a model's streamed line is open."""

    in_delta: bool = False

    def feed(self, event: dict[str, Any]) -> str:
        """The text to write for `event` (no trailing newline inside a stream of deltas)."""
        if event.get("type") == DELTA:
            text = delta_text(event)
            opening = "" if self.in_delta else f"{event.get('seq', ''):>4} model: "
            self.in_delta = True
            return opening + text
        prefix = "\n" if self.in_delta else ""
        self.in_delta = False
        return prefix + describe(event) + "\n"

    def close(self) -> str:
        """What ends the output: a newline when a streamed line is still open."""
        if self.in_delta:
            self.in_delta = False
            return "\n"
        return ""
