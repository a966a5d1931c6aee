"""`Store.atomic()` for a backend whose every call is its own write (SQLite, MongoDB): nothing to group.

The OE wraps a step's outcome, what it holds and its audit record in `atomic()` (oe/steps.py); PostgreSQL
makes that one transaction (postgres_transaction.py). Here each call inside stays durable on its return,
as the shared store suite expects; a step written without its audit is re-driven by the replay instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator


class EachCallItsOwn:
    """Mixed into a store without transactions across calls."""

    @contextlib.asynccontextmanager
    async def atomic(self) -> AsyncIterator[None]:
        yield
