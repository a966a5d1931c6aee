"""`MongoStore`'s console sessions (mixed into it): `console_sessions`, `_id` the hashed cookie id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pymongo import ASCENDING

from agent_runtime.oe.store.console_sessions import StoredSession

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

Document = dict[str, Any]
_COLLECTION = "console_sessions"


class MongoSessions:
    """Console sessions next to the store's other collections (expiry checked on read, pruned on create)."""

    if TYPE_CHECKING:

        def _col(self, name: str) -> AsyncCollection[Document]: ...

    async def _create_session_indexes(self) -> None:
        await self._col(_COLLECTION).create_index([("expires_at", ASCENDING)], name="by_expiry")

    async def put_console_session(self, record: StoredSession) -> None:
        document = {"expires_at": float(record.expires_at), "record": record.model_dump_json()}
        await self._col(_COLLECTION).replace_one({"_id": record.key}, document, upsert=True)

    async def get_console_session(self, key: str, *, now: float) -> StoredSession | None:
        found = await self._col(_COLLECTION).find_one({"_id": key, "expires_at": {"$gt": float(now)}})
        return None if found is None else StoredSession.model_validate_json(found["record"])

    async def drop_console_session(self, key: str) -> None:
        await self._col(_COLLECTION).delete_one({"_id": key})

    async def prune_console_sessions(self, *, now: float, limit: int = 500) -> int:
        collection = self._col(_COLLECTION)
        cursor = collection.find({"expires_at": {"$lte": float(now)}}, {"_id": 1}).limit(int(limit))
        keys = [document["_id"] async for document in cursor]
        if not keys:
            return 0
        return (await collection.delete_many({"_id": {"$in": keys}})).deleted_count
