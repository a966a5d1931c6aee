"""The one error a store raises when its database cannot be reached: the HTTP layer answers it 503."""

from __future__ import annotations

# Seconds a client is told to wait (Retry-After) while the store is away: a restart or a failover.
RETRY_AFTER_S = 2


class StoreUnavailable(RuntimeError):
    """The database is unreachable, restarting or too slow; nothing was written by the failed call
    (or, for a write whose answer was lost, the caller cannot tell: every OE write is safe to repeat)."""
