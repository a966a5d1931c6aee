"""The platform checkpointer (`app.checkpointer()`): a LangGraph saver over a real one, with two refusals.

It keeps checkpoints in the backend the settings name (MongoDB through `MongoDBSaver`, SQLite through
`AsyncSqliteSaver`, or memory) and adds what the platform promises on top:

- fail closed (CP-04): in a managed runtime without APP_ID every read and save raises;
- after a platform failure in the run (LG-08, LG-09) every save of the run raises, pending writes
  included, so nothing of the failing step persists and no later turn shows the failure to the model.

The backend is opened on first use (the Tool Pod builds the graph at start-up and never touches it), in a
worker thread for MongoDB (its saver creates indexes in its constructor) and per event loop for SQLite
(an aiosqlite connection belongs to the loop that opened it).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.memory import InMemorySaver

from agent_runtime.langgraph.checkpointer import CheckpointScopeError, CheckpointSettings
from agent_runtime.langgraph.thread_copy import copy_thread, copy_thread_sync
from agent_runtime.sdk.context import active_run
from agent_runtime.sdk.errors import PlatformFailure

Opener = Callable[[], Awaitable[BaseCheckpointSaver]]

# aiosqlite runs each connection in a non-daemon thread that only a close ends, and the interpreter joins
# non-daemon threads before it runs atexit handlers: an AER told to stop would hang on an open checkpoint
# connection. So open connections are stopped by a hook that runs before that join (what
# concurrent.futures uses for its own workers); the data is already committed.
_open_sqlite: weakref.WeakSet[Any] = weakref.WeakSet()
_stop_hook_registered = False


def _stop_open_sqlite() -> None:
    for connection in list(_open_sqlite):
        connection.stop()


def _track_sqlite(connection: Any) -> None:
    global _stop_hook_registered
    _open_sqlite.add(connection)
    if not _stop_hook_registered:
        threading._register_atexit(_stop_open_sqlite)  # type: ignore[attr-defined]
        _stop_hook_registered = True


class PlatformCheckpointer(BaseCheckpointSaver):
    """A BaseCheckpointSaver with the platform's refusals over a backend saver (see the module doc)."""

    def __init__(
        self,
        *,
        backend: BaseCheckpointSaver | None = None,
        opener: Opener | None = None,
        loop_bound: bool = False,
        refusal: str | None = None,
        store: str = "custom",
        versions: BaseCheckpointSaver | None = None,
    ) -> None:
        if (backend is None) == (opener is None):
            raise ValueError("give the platform checkpointer either a backend saver or an opener")
        super().__init__(serde=backend.serde if backend is not None else None)
        self.store = store
        self._backend = backend
        self._opener = opener
        self._loop_bound = loop_bound
        self._opened: dict[asyncio.AbstractEventLoop | None, BaseCheckpointSaver] = {}
        self._refusal = refusal
        # Channel versions must follow one scheme per backend; the opened backend may not exist yet.
        self._versions = versions or backend or InMemorySaver()

    @classmethod
    def wrapping(cls, saver: BaseCheckpointSaver, *, refusal: str | None = None) -> PlatformCheckpointer:
        """The platform's refusals over a saver you built yourself."""
        return cls(backend=saver, refusal=refusal, store=type(saver).__name__)

    @classmethod
    def from_settings(cls, settings: CheckpointSettings) -> PlatformCheckpointer:
        """The checkpointer the settings name; nothing is opened until the first read or save."""
        if settings.store == "memory":
            return cls(backend=InMemorySaver(), refusal=settings.refusal, store="memory")
        if settings.store == "sqlite":
            path = settings.sqlite_path
            assert path is not None

            async def open_sqlite() -> BaseCheckpointSaver:
                import aiosqlite
                from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

                await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
                connection = await aiosqlite.connect(str(path))
                _track_sqlite(connection)
                saver = AsyncSqliteSaver(connection)
                await saver.setup()
                return saver

            return cls(opener=open_sqlite, loop_bound=True, refusal=settings.refusal, store="sqlite")
        uri, db_name = settings.mongodb_uri, settings.db_name
        assert uri is not None and db_name is not None

        async def open_mongo() -> BaseCheckpointSaver:
            from langgraph.checkpoint.mongodb import MongoDBSaver
            from pymongo import MongoClient

            def build() -> BaseCheckpointSaver:
                client: MongoClient[Any] = MongoClient(uri, appname="agent-engine-aer")
                return MongoDBSaver(client, db_name=db_name)

            return await asyncio.to_thread(build)

        # MongoDBSaver keeps LangGraph's default integer channel versions.
        return cls(
            opener=open_mongo,
            refusal=settings.refusal,
            store="mongodb",
            versions=BaseCheckpointSaver(),
        )

    # the refusals -------------------------------------------------------------------------------------

    def _admit_read(self) -> None:
        if self._refusal is not None:
            raise CheckpointScopeError(self._refusal)

    def _admit_save(self, what: str) -> None:
        self._admit_read()
        run = active_run()
        if run is not None and run.platform_failure is not None:
            raise PlatformFailure(
                f"checkpoint {what} refused after a platform failure in this turn: {run.platform_failure}"
            )

    async def _saver(self) -> BaseCheckpointSaver:
        if self._backend is not None:
            return self._backend
        key = asyncio.get_running_loop() if self._loop_bound else None
        saver = self._opened.get(key)
        if saver is None:
            assert self._opener is not None
            saver = await self._opener()
            self._opened.setdefault(key, saver)
            saver = self._opened[key]
        return saver

    def _sync_saver(self) -> BaseCheckpointSaver:
        if self._backend is not None:
            return self._backend
        raise NotImplementedError(
            f"the {self.store} platform checkpointer is async: run the graph with ainvoke/astream "
            "(the AER does)"
        )

    async def aclose(self) -> None:
        """Close what the checkpointer opened in this event loop."""
        key = asyncio.get_running_loop() if self._loop_bound else None
        saver = self._opened.pop(key, None)
        connection = getattr(saver, "conn", None)
        if connection is not None and hasattr(connection, "close"):
            result = connection.close()
            if isinstance(result, Awaitable):
                await result
        client = getattr(saver, "client", None)
        if client is not None and hasattr(client, "close"):
            await asyncio.to_thread(client.close)

    # async API ----------------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._admit_read()
        return await (await self._saver()).aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        self._admit_read()
        saver = await self._saver()
        async for item in saver.alist(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._admit_save("save")
        return await (await self._saver()).aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._admit_save("pending writes")
        await (await self._saver()).aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self._admit_read()
        await (await self._saver()).adelete_thread(thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """The backend's own copy where it has one, else `thread_copy.copy_thread` through its calls."""
        self._admit_save("copy")
        saver = await self._saver()
        if type(saver).acopy_thread is not BaseCheckpointSaver.acopy_thread:
            await saver.acopy_thread(source_thread_id, target_thread_id)
            return
        await copy_thread(saver, source_thread_id, target_thread_id)

    # sync API (memory and wrapped savers only) --------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._admit_read()
        return self._sync_saver().get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        self._admit_read()
        yield from self._sync_saver().list(config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._admit_save("save")
        return self._sync_saver().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._admit_save("pending writes")
        self._sync_saver().put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._admit_read()
        self._sync_saver().delete_thread(thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._admit_save("copy")
        saver = self._sync_saver()
        if type(saver).copy_thread is not BaseCheckpointSaver.copy_thread:
            saver.copy_thread(source_thread_id, target_thread_id)
            return
        copy_thread_sync(saver, source_thread_id, target_thread_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self._versions.get_next_version(current, channel)
