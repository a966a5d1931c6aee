"""Embedding calls that arrive while the model is busy are run together as one batch.

A transformer costs far less per text in a batch than one text at a time (padding aside, the work is
matrix products that a batch fills better), and concurrent writes each ask for one text: so the first
call runs at once, and every call that arrives meanwhile waits for the next run, which takes them all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import anyio.to_thread
import numpy as np

from agent_runtime.memory.vectors import Matrix

MAX_BATCH_TEXTS = 64


class Coalescer:
    """Runs `embed_sync` on a worker thread, one batch at a time, over the texts of every waiting call."""

    def __init__(self, embed_sync: Callable[[Sequence[str]], Matrix], *, max_texts: int = MAX_BATCH_TEXTS):
        self._embed_sync = embed_sync
        self._max_texts = max_texts
        self._pending: list[tuple[list[str], asyncio.Future[Matrix]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def embed(self, texts: Sequence[str]) -> Matrix:
        future: asyncio.Future[Matrix] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        return await future

    def _take(self) -> list[tuple[list[str], asyncio.Future[Matrix]]]:
        """Whole calls, oldest first, up to `max_texts` texts (always at least one call)."""
        taken, count = [], 0
        while self._pending and (not taken or count + len(self._pending[0][0]) <= self._max_texts):
            call = self._pending.pop(0)
            count += len(call[0])
            if not call[1].done():  # a cancelled caller's texts are not embedded
                taken.append(call)
        return taken

    async def _drain(self) -> None:
        while self._pending:
            calls = self._take()
            if not calls:
                continue
            texts = [text for call_texts, _ in calls for text in call_texts]
            try:
                matrix = await anyio.to_thread.run_sync(self._embed_sync, texts)
            except Exception as exc:  # each caller gets the error its own call would have raised
                for _, future in calls:
                    if not future.done():
                        future.set_exception(exc)
                continue
            start = 0
            for call_texts, future in calls:
                rows = matrix[start : start + len(call_texts)]
                start += len(call_texts)
                if not future.done():
                    future.set_result(np.ascontiguousarray(rows))
