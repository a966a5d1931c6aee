"""The durable execution log (B-17): one record per node, step and lifecycle change of each execution.

Every component that sees an execution writes its own records: the OE each lifecycle change and step (its
events), the AER each LangGraph node's start and end (`langgraph/node_logger.py`). Each record carries the
execution's id and the trace and span ids current when it was written, so a log line leads to its span.

Sinks (`AGENTIC_EXECUTION_LOG`, a comma-separated list of `jsonl` and `mongodb`, or `none`, the default):

- `jsonl`: `<AGENTIC_EXECUTION_LOG_DIR>/<execution_id>.<component>.jsonl` (default dir `/tmp/executions`,
  the pod's emptyDir), one file per execution and process, one JSON object a line;
- `mongodb`: the collection `AGENTIC_EXECUTION_LOG_COLLECTION` (default `execution_logs`) of the database in
  `AGENTIC_EXECUTION_LOG_MONGODB_URI` (or `MONGODB_URI`): every component's records in one place.

Writes are queued and flushed by one background task, so a step never waits on the log's disk or
database. `read` (the OE's `GET /execution/{id}/logs`) merges the collection and the JSONL files it can see,
in time order. Records hold names, states and categories (what the events already show), never arguments
or results.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_runtime import tracing

logger = logging.getLogger(__name__)

LOG_ENV = "AGENTIC_EXECUTION_LOG"
DIR_ENV = "AGENTIC_EXECUTION_LOG_DIR"
COLLECTION_ENV = "AGENTIC_EXECUTION_LOG_COLLECTION"
MONGODB_URI_ENV = "AGENTIC_EXECUTION_LOG_MONGODB_URI"
SINKS = ("jsonl", "mongodb")
DEFAULT_DIR = "/tmp/executions"  # noqa: S108 (the pod's emptyDir, B-17)
DEFAULT_COLLECTION = "execution_logs"
_QUEUE_LIMIT = 10_000
_SAFE_ID = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


class ExecutionLogError(ValueError):
    """A log setting that cannot be used; the message names the variable and the fix."""


class LogRecord(BaseModel):
    """One line of an execution's log."""

    model_config = ConfigDict(extra="forbid")

    execution_id: str
    at: float
    component: str  # oe | aer | tool | memory
    kind: Literal["lifecycle", "step", "node"]
    event: str  # created, running, step_started, step_finished, suspended, ... node_start, node_end
    step: int | None = None
    node: str | None = None
    tool: str | None = None
    status: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class LogSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    sinks: tuple[str, ...] = ()
    directory: Path = Path(DEFAULT_DIR)
    mongodb_uri: str | None = None
    collection: str = DEFAULT_COLLECTION

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LogSettings:
        raw = env.get(LOG_ENV, "").strip().lower()
        names = tuple(dict.fromkeys(n.strip() for n in raw.split(",") if n.strip()))
        if names in ((), ("none",)):
            names = ()
        unknown = [name for name in names if name not in SINKS]
        if unknown:
            raise ExecutionLogError(
                f"{LOG_ENV}: unknown sink {unknown[0]!r}; use a comma-separated list of jsonl and "
                "mongodb, or none"
            )
        uri = env.get(MONGODB_URI_ENV, "").strip() or env.get("MONGODB_URI", "").strip() or None
        if "mongodb" in names and uri is None:
            raise ExecutionLogError(
                f"{LOG_ENV}: the mongodb sink needs {MONGODB_URI_ENV} (or MONGODB_URI); set it, or "
                "drop mongodb"
            )
        return cls(
            sinks=names,
            directory=Path(env.get(DIR_ENV, "").strip() or DEFAULT_DIR),
            mongodb_uri=uri,
            collection=env.get(COLLECTION_ENV, "").strip() or DEFAULT_COLLECTION,
        )


def jsonl_path(directory: Path, execution_id: str, component: str) -> Path:
    """The file one process writes an execution's records to; ids outside [A-Za-z0-9-_.] are refused."""
    if not execution_id or not set(execution_id) <= _SAFE_ID or execution_id.startswith("."):
        raise ValueError(f"execution_id {execution_id!r} cannot name a log file")
    return directory / f"{execution_id}.{component}.jsonl"


class ExecutionLog:
    """One process's writer (and the OE's reader) of the execution log."""

    def __init__(self, settings: LogSettings, *, component: str) -> None:
        self.settings = settings
        self.component = component
        self._queue: asyncio.Queue[LogRecord] | None = None
        self._task: asyncio.Task[None] | None = None
        self._mongo: Any = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, component: str) -> ExecutionLog:
        return cls(LogSettings.from_env(os.environ if env is None else env), component=component)

    @property
    def enabled(self) -> bool:
        return bool(self.settings.sinks)

    def write(
        self,
        execution_id: str,
        *,
        kind: Literal["lifecycle", "step", "node"],
        event: str,
        step: int | None = None,
        node: str | None = None,
        tool: str | None = None,
        status: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Queue one record (with the current trace and span ids); never blocks, never raises."""
        if not self.settings.sinks:
            return
        trace_id, span_id = tracing.current_ids()
        record = LogRecord(
            execution_id=execution_id,
            at=time.time(),
            component=self.component,
            kind=kind,
            event=event,
            step=step,
            node=node,
            tool=tool,
            status=status,
            trace_id=trace_id,
            span_id=span_id,
            detail=dict(detail or {}),
        )
        try:
            queue = self._ensure_writer()
        except RuntimeError:  # no running loop (a sync caller): write at once
            self._write_jsonl([record])
            return
        if queue.qsize() >= _QUEUE_LIMIT:
            logger.warning("execution log queue full: a record of %s dropped", execution_id)
            return
        queue.put_nowait(record)

    def _ensure_writer(self) -> asyncio.Queue[LogRecord]:
        loop = asyncio.get_running_loop()
        task = self._task
        if self._queue is None or task is None or task.done() or task.get_loop() is not loop:
            self._queue = asyncio.Queue()
            self._task = loop.create_task(self._drain(self._queue))
        return self._queue

    async def _drain(self, queue: asyncio.Queue[LogRecord]) -> None:
        while True:
            batch = [await queue.get()]
            while not queue.empty() and len(batch) < 500:
                batch.append(queue.get_nowait())
            await self._flush(batch)
            for _ in batch:
                queue.task_done()

    async def _flush(self, batch: list[LogRecord]) -> None:
        if "jsonl" in self.settings.sinks:
            try:
                await asyncio.to_thread(self._write_jsonl, batch)
            except OSError as exc:
                logger.warning("execution log not written to %s: %s", self.settings.directory, exc)
        if "mongodb" in self.settings.sinks:
            try:
                documents = [record.model_dump(mode="json") for record in batch]
                await self._collection().insert_many(documents, ordered=False)
            except Exception as exc:  # a down database must not take the component with it
                logger.warning("execution log not written to MongoDB: %s", type(exc).__name__)

    def _write_jsonl(self, batch: list[LogRecord]) -> None:
        if "jsonl" not in self.settings.sinks:
            return
        self.settings.directory.mkdir(parents=True, exist_ok=True)
        by_file: dict[Path, list[str]] = {}
        for record in batch:
            path = jsonl_path(self.settings.directory, record.execution_id, self.component)
            by_file.setdefault(path, []).append(record.model_dump_json())
        for path, lines in by_file.items():
            with path.open("a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")

    def _collection(self) -> Any:
        if self._mongo is None:
            from pymongo import AsyncMongoClient

            self._mongo = AsyncMongoClient(self.settings.mongodb_uri, serverSelectionTimeoutMS=5000)
        database = self._mongo.get_default_database(default="agent_engine")
        return database[self.settings.collection]

    async def flush(self) -> None:
        """Wait until every queued record is written."""
        if self._queue is not None and self._task is not None and not self._task.done():
            await self._queue.join()

    async def aclose(self) -> None:
        await self.flush()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                await self._task
        if self._mongo is not None:
            await self._mongo.close()
            self._mongo = None

    async def read(self, execution_id: str, *, limit: int = 5000) -> list[LogRecord]:
        """Every record of the execution this process can see (the collection and the JSONL files in its
        directory), oldest first; at most `limit`."""
        await self.flush()
        records: dict[tuple[Any, ...], LogRecord] = {}
        if "mongodb" in self.settings.sinks:
            cursor = self._collection().find({"execution_id": execution_id}, {"_id": 0}).limit(limit)
            async for document in cursor:
                record = LogRecord.model_validate(document)
                records[_key(record)] = record
        if "jsonl" in self.settings.sinks:
            for record in await asyncio.to_thread(self._read_jsonl, execution_id):
                records.setdefault(_key(record), record)
        return sorted(records.values(), key=lambda r: (r.at, r.component))[:limit]

    def _read_jsonl(self, execution_id: str) -> list[LogRecord]:
        jsonl_path(self.settings.directory, execution_id, self.component)  # refuses an unsafe id
        out = []
        for path in sorted(self.settings.directory.glob(f"{execution_id}.*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValueError):
                    out.append(LogRecord.model_validate(json.loads(line)))
        return out


def _key(record: LogRecord) -> tuple[Any, ...]:
    return (record.at, record.component, record.event, record.step, record.node)
