"""Which replica may act outside kopf's watches (the periodic resync), read from kopf's peering record.

kopf pauses its watches on every replica but the highest-priority live one; the resync loop runs outside
kopf, so it asks the same question of the peering object before each round.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any


def outranked(status: Mapping[str, Any], *, identity: str, priority: int, now: datetime.datetime) -> bool:
    """True when another live peer has a priority at least ours (kopf pauses on ties too)."""
    for peer, info in status.items():
        if peer == identity or not isinstance(info, Mapping):
            continue
        lastseen = info.get("lastseen")
        try:
            seen = datetime.datetime.fromisoformat(str(lastseen)) if lastseen else now
        except ValueError:
            seen = now
        if seen.tzinfo is None:
            seen = seen.replace(tzinfo=datetime.UTC)
        alive = seen + datetime.timedelta(seconds=int(info.get("lifetime", 60))) > now
        if alive and int(info.get("priority", 0)) >= priority:
            return True
    return False
