"""An execution's events as server-sent events (`GET /execution/{id}/events`).

Each event is `id: <seq>`, `event: <type>`, `data: <the EventRecord as JSON>`; a comment line is the
heartbeat. A listener that fell a whole buffer behind gets one `event: resume` whose data names the seq
to resume after (`{"type": "resume", "data": {"after": N, "reason": "slow_client"}}`), without an `id:`
line (so a client's Last-Event-ID stays its last real event), and the stream ends: reconnecting with
`Last-Event-ID: N` (or `?after=N`) reads the rest from the store, nothing missed, nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from agent_runtime.oe.events import Lagging
from agent_runtime.oe.store.base import EventRecord

HEARTBEAT = b": keep-alive\n\n"


def sse_frame(event: EventRecord) -> bytes:
    payload = json.dumps(event.model_dump(mode="json"), separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.type}\ndata: {payload}\n\n".encode()


def resume_frame(execution_id: str, lagging: Lagging) -> bytes:
    payload = json.dumps(
        {
            "execution_id": execution_id,
            "type": "resume",
            "seq": lagging.after,
            "data": {"after": lagging.after, "reason": "slow_client"},
        },
        separators=(",", ":"),
    )
    return f"event: resume\ndata: {payload}\n\n".encode()


async def sse_frames(
    execution_id: str, events: AsyncIterator[EventRecord | Lagging | None]
) -> AsyncIterator[bytes]:
    async for event in events:
        if event is None:
            yield HEARTBEAT
        elif isinstance(event, Lagging):
            yield resume_frame(execution_id, event)
            return
        else:
            yield sse_frame(event)
