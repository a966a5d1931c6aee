"""The OE store over MongoDB (or anything speaking its wire protocol) with pymongo's native async client.

Collections: `executions` (`_id` is the execution id), `steps` (unique `(execution_id, step)`), `audit`,
`events` (unique `(execution_id, seq)`) and `claims` (`_id` is the claim's key). Caller-supplied JSON
(an execution's input, result and suspension, a step's outcome, whole audit and event records) is kept
as JSON text: keys such as `$ref` or `a.b` are not valid document field names everywhere, and numbers
keep their exact JSON form.

No transactions. Every write is one single-document operation; atomicity across OE replicas rests on
MongoDB's single-document updates and on unique indexes. FerretDB v1 applies an update as a read
followed by a whole-document write, so on it two writers of one document can lose each other's change;
this store therefore also serializes its own writes to one execution or step within the process, which
keeps a single OE correct there. Unique indexes hold everywhere, so step claims, one-time claims (a
human decision) and event numbering are correct across replicas on both; a status compare-and-set
(`transition`) is not, on FerretDB v1, between two replicas writing one execution at the same moment.

Durability follows the URI's write concern (add `w=majority&journal=true` for a replica set).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Collection, Hashable
from typing import Any

from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import ConfigurationError, DuplicateKeyError, InvalidURI

from agent_runtime.oe.store.base import (
    AuditRecord,
    EventRecord,
    ExecutionRecord,
    ExecutionState,
    Page,
    StepRecord,
)
from agent_runtime.oe.store.codec import (
    decode_cursor,
    encode_cursor,
    encode_execution_changes,
    redact_uri,
)
from agent_runtime.oe.store.mongo_deliveries import MongoDeliveries
from agent_runtime.oe.store.mongo_ledger import MongoLedger
from agent_runtime.oe.store.mongo_sessions import MongoSessions
from agent_runtime.oe.store.replicas import ferretdb_refusal
from agent_runtime.oe.store.transactions import EachCallItsOwn
from agent_runtime.protocol import CallOutcome

Document = dict[str, Any]

# ExecutionRecord fields whose value is arbitrary caller JSON, stored as JSON text.
_TEXT_FIELDS = frozenset({"input", "result", "suspension", "reviews"})
# How often an append retries after another replica took the seq it computed.
_MAX_SEQ_ATTEMPTS = 100


def _exec_doc(record: ExecutionRecord) -> Document:
    doc = record.model_dump(mode="json", exclude={"execution_id"})
    for name in _TEXT_FIELDS:
        doc[name] = json.dumps(doc[name], ensure_ascii=False, separators=(",", ":"))
    doc["_id"] = record.execution_id
    return doc


def _exec_record(doc: Document) -> ExecutionRecord:
    doc["execution_id"] = doc.pop("_id")
    for name in _TEXT_FIELDS:
        if isinstance(doc.get(name), str):
            doc[name] = json.loads(doc[name])
    return ExecutionRecord.model_validate(doc)


def _exec_set(encoded: dict[str, str]) -> Document:
    """`$set` for validated changes (field -> JSON text): text fields stay text, the rest become values."""
    return {name: text if name in _TEXT_FIELDS else json.loads(text) for name, text in encoded.items()}


def _step_doc(record: StepRecord) -> Document:
    doc = record.model_dump(mode="json", exclude={"outcome"})
    doc["outcome"] = None if record.outcome is None else record.outcome.model_dump_json()
    # The outcome is JSON text; its status is also a field, so `reopen_step` can select held steps.
    doc["outcome_status"] = None if record.outcome is None else record.outcome.status
    return doc


def _step_record(doc: Document) -> StepRecord:
    doc.pop("_id", None)
    doc.pop("outcome_status", None)
    outcome = doc.get("outcome")
    doc["outcome"] = None if outcome is None else CallOutcome.model_validate_json(outcome)
    return StepRecord.model_validate(doc)


class MongoStore(EachCallItsOwn, MongoLedger, MongoDeliveries, MongoSessions):
    """`Store` over a MongoDB database; `uri` may hold credentials and never appears in messages."""

    def __init__(self, uri: str, database: str, *, replicas: int = 1) -> None:
        self._uri = uri
        self.database = database
        self.replicas = replicas  # how many OEs share the database: refused above one on FerretDB v1
        self._client: AsyncMongoClient[Document] | None = None
        self._db: AsyncDatabase[Document] | None = None
        # Per-process write serialization (see the module docstring); entries go when no call holds them.
        self._locks: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = weakref.WeakValueDictionary()

    def __repr__(self) -> str:
        return f"MongoStore({redact_uri(self._uri)!r}, {self.database!r})"

    def _lock(self, *key: Hashable) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def _col(self, name: str) -> AsyncCollection[Document]:
        if self._db is None:
            raise RuntimeError("MongoStore is not open: await store.open() first")
        return self._db[name]

    async def open(self) -> None:
        """Connect, then create the indexes; idempotent."""
        if self._client is not None:
            return
        problem = ""
        try:
            client: AsyncMongoClient[Document] = AsyncMongoClient(self._uri)
        except (ConfigurationError, InvalidURI, ValueError, TypeError) as exc:
            problem = str(exc)
        if problem:
            # Raised outside the except block, so no traceback carries pymongo's error (or the password).
            problem = problem.replace(self._uri, redact_uri(self._uri))
            raise ValueError(
                f"OE_MONGODB_URI is not a valid MongoDB URI ({redact_uri(self._uri)}): {problem}"
            )
        self._client, self._db = client, client[self.database]
        try:
            refusal = ferretdb_refusal(await self._db.command("buildInfo"), replicas=self.replicas)
            if refusal:
                raise ValueError(refusal)
            await self._create_indexes()
        except BaseException:
            await self.close()
            raise

    async def _create_indexes(self) -> None:
        executions = self._col("executions")
        newest_first = [("created_at", DESCENDING), ("_id", DESCENDING)]
        await executions.create_index(newest_first, name="newest_first")
        await executions.create_index([("agent", ASCENDING), *newest_first], name="by_agent")
        await executions.create_index([("status", ASCENDING), *newest_first], name="by_status")
        # An agentRef child's parent (issue 38); sparse: most executions have none.
        await executions.create_index([("parent.execution_id", ASCENDING)], name="by_parent", sparse=True)
        await self._col("steps").create_index(
            [("execution_id", ASCENDING), ("step", ASCENDING)], name="execution_step", unique=True
        )
        await self._col("audit").create_index(
            [("execution_id", ASCENDING), ("_id", ASCENDING)], name="execution_order"
        )
        await self._col("events").create_index(
            [("execution_id", ASCENDING), ("seq", ASCENDING)], name="execution_seq", unique=True
        )
        await self._col("events").create_index([("at", ASCENDING)], name="retention_by_at")
        await self._create_delivery_indexes()
        await self._create_ledger_indexes()
        await self._create_session_indexes()

    async def close(self) -> None:
        client, self._client, self._db = self._client, None, None
        if client is not None:
            await client.close()

    # executions

    async def create_execution(self, record: ExecutionRecord) -> None:
        try:
            await self._col("executions").insert_one(_exec_doc(record))
        except DuplicateKeyError:
            raise KeyError(record.execution_id) from None

    async def get_execution(self, execution_id: str) -> ExecutionRecord | None:
        doc = await self._col("executions").find_one({"_id": execution_id})
        return None if doc is None else _exec_record(doc)

    async def transition(
        self,
        execution_id: str,
        *,
        from_states: frozenset[ExecutionState],
        changes: dict[str, Any],
    ) -> ExecutionRecord | None:
        encoded = encode_execution_changes(changes, allow_status=True)
        if not from_states:
            return None
        query = {"_id": execution_id, "status": {"$in": [ExecutionState(s).value for s in from_states]}}
        executions = self._col("executions")
        async with self._lock("execution", execution_id):
            if encoded:
                doc = await executions.find_one_and_update(
                    query, {"$set": _exec_set(encoded)}, return_document=ReturnDocument.AFTER
                )
            else:
                doc = await executions.find_one(query)
        return None if doc is None else _exec_record(doc)

    async def update_execution(self, execution_id: str, changes: dict[str, Any]) -> None:
        encoded = encode_execution_changes(changes, allow_status=False)
        if not encoded:
            return
        async with self._lock("execution", execution_id):
            await self._col("executions").update_one({"_id": execution_id}, {"$set": _exec_set(encoded)})

    async def note_step(self, execution_id: str, step: int, *, at: float) -> None:
        update = {"$max": {"step_count": int(step)}, "$set": {"updated_at": float(at)}}
        async with self._lock("execution", execution_id):
            await self._col("executions").update_one({"_id": execution_id}, update)

    async def list_executions(
        self,
        *,
        agent: str | None = None,
        project_id: str | None = None,
        project_ids: Collection[str] | None = None,
        status: ExecutionState | None = None,
        limit: int = 50,
        cursor: str | None = None,
        parent_execution_id: str | None = None,
    ) -> Page:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        if project_ids is not None and not project_ids:
            return Page(items=[])
        query: Document = {}
        if agent is not None:
            query["agent"] = agent
        if project_id is not None:
            query["project_id"] = project_id
        if project_ids is not None:
            query.setdefault("$and", []).append({"project_id": {"$in": sorted(project_ids)}})
        if status is not None:
            query["status"] = ExecutionState(status).value
        if parent_execution_id is not None:
            query["parent.execution_id"] = parent_execution_id
        if cursor is not None:
            created_at, last_id = decode_cursor(cursor)
            query["$or"] = [
                {"created_at": {"$lt": created_at}},
                {"created_at": created_at, "_id": {"$lt": last_id}},
            ]
        found = (
            self._col("executions")
            .find(query)
            .sort([("created_at", DESCENDING), ("_id", DESCENDING)])
            .limit(limit + 1)  # one more than asked tells whether another page follows
        )
        items = [_exec_record(doc) async for doc in found]
        more = len(items) > limit
        items = items[:limit]
        next_cursor = encode_cursor(items[-1].created_at, items[-1].execution_id) if more else None
        return Page(items=items, next_cursor=next_cursor)

    async def count_executions(self) -> int:
        return await self._col("executions").count_documents({})

    # steps

    async def claim_step(self, record: StepRecord) -> StepRecord | None:
        steps = self._col("steps")
        key = {"execution_id": record.execution_id, "step": record.step}
        # Loop only if the winner's document was deleted between our insert and our read.
        while True:
            try:
                await steps.insert_one(_step_doc(record))
                return None
            except DuplicateKeyError:
                existing = await steps.find_one(key)
            if existing is not None:
                return _step_record(existing)

    async def get_step(self, execution_id: str, step: int) -> StepRecord | None:
        doc = await self._col("steps").find_one({"execution_id": execution_id, "step": step})
        return None if doc is None else _step_record(doc)

    async def finish_step(self, execution_id: str, step: int, outcome: CallOutcome, *, at: float) -> None:
        update = {
            "$set": {
                "state": "done",
                "outcome": outcome.model_dump_json(),
                "outcome_status": outcome.status,
                "updated_at": float(at),
            }
        }
        async with self._lock("step", execution_id, step):
            await self._col("steps").update_one({"execution_id": execution_id, "step": step}, update)

    async def reset_step(self, execution_id: str, step: int, *, owner: str, at: float) -> None:
        query = {"execution_id": execution_id, "step": step, "state": "in_progress"}
        async with self._lock("step", execution_id, step):
            await self._col("steps").update_one(query, {"$set": {"owner": owner, "updated_at": float(at)}})

    async def reopen_step(self, execution_id: str, step: int, *, owner: str, run: int, at: float) -> bool:
        query = {"execution_id": execution_id, "step": step, "state": "done", "outcome_status": "suspend"}
        update = {"$set": {"state": "in_progress", "owner": owner, "run": int(run), "updated_at": float(at)}}
        async with self._lock("step", execution_id, step):
            done = await self._col("steps").update_one(query, update)
        return done.modified_count == 1

    async def delete_step(self, execution_id: str, step: int) -> None:
        query = {"execution_id": execution_id, "step": step, "state": "in_progress"}
        async with self._lock("step", execution_id, step):
            await self._col("steps").delete_one(query)

    # one-time claims

    async def claim_once(self, key: str, value: dict[str, Any]) -> dict[str, Any] | None:
        """On `_id`, which is unique on MongoDB and FerretDB alike: the one write both keep atomic."""
        claims = self._col("claims")
        try:
            await claims.insert_one({"_id": key, "value": json.dumps(value, separators=(",", ":"))})
            return None
        except DuplicateKeyError:
            doc = await claims.find_one({"_id": key})
        stored: dict[str, Any] = json.loads(doc["value"]) if doc is not None else {}
        return stored

    # audit log

    # append_audit: MongoLedger (the hash chain; `_id` is `<execution_id>:<seq>`)

    async def list_audit(self, execution_id: str) -> list[AuditRecord]:
        # Chained records by seq; records from before the chain (ObjectId `_id`, no seq) sort first.
        found = (
            self._col("audit")
            .find({"execution_id": execution_id})
            .sort([("seq", ASCENDING), ("_id", ASCENDING)])
        )
        return [AuditRecord.model_validate_json(doc["record"]) async for doc in found]

    # events

    async def append_event(
        self, execution_id: str, *, type: str, step: int | None, data: dict[str, Any], at: float
    ) -> EventRecord:
        """The next seq is the highest one stored plus one; the unique index on (execution_id, seq) makes a
        concurrent append elsewhere fail ours, which then reads again. No counter: FerretDB v1 loses
        concurrent `$inc`s, and a crash between bumping a counter and inserting would leave a gap."""
        events = self._col("events")
        record = EventRecord(execution_id=execution_id, seq=0, type=type, step=step, data=data, at=at)
        async with self._lock("events", execution_id):
            for _ in range(_MAX_SEQ_ATTEMPTS):
                last = await events.find_one(
                    {"execution_id": execution_id}, projection={"seq": True}, sort=[("seq", DESCENDING)]
                )
                record.seq = (0 if last is None else int(last["seq"])) + 1
                doc = {
                    "execution_id": execution_id,
                    "seq": record.seq,
                    "record": record.model_dump_json(),
                    # What retention selects on (prune_events); older documents lack them and stay.
                    "type": type,
                    "at": at,
                }
                try:
                    await events.insert_one(doc)
                    return record
                except DuplicateKeyError:
                    continue
        raise RuntimeError(f"could not append an event to {execution_id} after {_MAX_SEQ_ATTEMPTS} attempts")

    async def list_events(
        self, execution_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[EventRecord]:
        found = (
            self._col("events")
            .find({"execution_id": execution_id, "seq": {"$gt": after_seq}})
            .sort("seq", ASCENDING)
        )
        if limit is not None:
            found = found.limit(limit)
        return [EventRecord.model_validate_json(doc["record"]) async for doc in found]

    async def prune_events(self, *, types: Collection[str], before: float, limit: int) -> int:
        events = self._col("events")
        found = events.find(
            {"type": {"$in": sorted(types)}, "at": {"$lt": before}},
            projection={"execution_id": True, "seq": True},
        ).limit(limit)
        candidates = [doc async for doc in found]
        latest: dict[str, int] = {}
        for execution_id in {doc["execution_id"] for doc in candidates}:
            last = await events.find_one(
                {"execution_id": execution_id}, projection={"seq": True}, sort=[("seq", DESCENDING)]
            )
            latest[execution_id] = int(last["seq"]) if last is not None else 0
        # Never an execution's latest event: the next seq is counted from it.
        doomed = [doc["_id"] for doc in candidates if int(doc["seq"]) < latest[doc["execution_id"]]]
        if not doomed:
            return 0
        return int((await events.delete_many({"_id": {"$in": doomed}})).deleted_count)
