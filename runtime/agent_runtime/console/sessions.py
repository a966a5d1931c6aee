"""Console sessions: an opaque id in an HttpOnly cookie, the bearer token it stands for kept server-side.

The browser never holds the token in a readable form: the cookie carries only a random id. The OE's store
keeps the session (`console_sessions`, oe/store/console_sessions.py) under the SHA-256 of that id, with the
token sealed (AES-GCM) under a key derived from the id, so every OE replica sharing the store knows the
session and a dump of the store opens none. The session's CSRF token is derived from the id too (an HMAC),
so it needs no storage. A store without session rows (a test double) keeps them in this process instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agent_runtime.oe.store.console_sessions import ConsoleSessionRows, StoredSession

COOKIE = "ae_console"
LOGIN_COOKIE = "ae_console_login"
COOKIE_PATH = "/console"
DEFAULT_TTL_S = 8 * 3600.0
DEFAULT_MAX_SESSIONS = 10_000  # the in-process fallback's bound
_MAX_ID = 128
_NONCE = 12


@dataclass(frozen=True)
class Session:
    """One signed-in browser. `token` is the bearer the client API checks on every request."""

    token: str
    csrf: str
    username: str
    expires_at: float

    def csrf_matches(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.csrf.encode())


def _key(session_id: str) -> str:
    """The row's key: the id's digest (the store never holds a cookie value)."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


def _derived(session_id: str, purpose: bytes) -> bytes:
    return hmac.new(session_id.encode("utf-8", "surrogatepass"), purpose, hashlib.sha256).digest()


def csrf_token(session_id: str) -> str:
    """The session's CSRF token: from the id, so any replica computes the same one."""
    return base64.urlsafe_b64encode(_derived(session_id, b"ae-console csrf")).decode().rstrip("=")


def seal(session_id: str, token: str, *, row_key: str) -> str:
    """The token encrypted under a key only the cookie's holder can derive, bound to its row."""
    nonce = os.urandom(_NONCE)
    sealed = AESGCM(_derived(session_id, b"ae-console token")).encrypt(
        nonce, token.encode("utf-8"), row_key.encode()
    )
    return base64.b64encode(nonce + sealed).decode()


def unseal(session_id: str, sealed: str, *, row_key: str) -> str | None:
    try:
        raw = base64.b64decode(sealed, validate=True)
        plain = AESGCM(_derived(session_id, b"ae-console token")).decrypt(
            raw[:_NONCE], raw[_NONCE:], row_key.encode()
        )
    except (InvalidTag, ValueError):
        return None
    return plain.decode("utf-8")


class MemorySessionRows:
    """Session rows in this process (bounded, least recently used dropped first): for a store without
    `console_sessions`. Sessions then end with the process and are not shared by replicas."""

    def __init__(self, *, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._rows: OrderedDict[str, StoredSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    async def put_console_session(self, record: StoredSession) -> None:
        self._rows[record.key] = record
        while len(self._rows) > self.max_sessions:
            self._rows.popitem(last=False)

    async def get_console_session(self, key: str, *, now: float) -> StoredSession | None:
        row = self._rows.get(key)
        if row is None:
            return None
        if now >= row.expires_at:
            del self._rows[key]
            return None
        self._rows.move_to_end(key)
        return row

    async def drop_console_session(self, key: str) -> None:
        self._rows.pop(key, None)

    async def prune_console_sessions(self, *, now: float, limit: int = 500) -> int:
        expired = [key for key, row in self._rows.items() if now >= row.expires_at][:limit]
        for key in expired:
            del self._rows[key]
        return len(expired)


class SessionStore:
    """Sessions of `ttl_s` each from sign-in, kept in `rows` (the OE's store, or this process)."""

    def __init__(
        self,
        rows: ConsoleSessionRows | None = None,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rows: ConsoleSessionRows = rows if rows is not None else MemorySessionRows()
        self.ttl_s = ttl_s
        self._clock = clock

    @property
    def shared(self) -> bool:
        """Whether the sessions live in the OE's store (so every replica knows them)."""
        return not isinstance(self.rows, MemorySessionRows)

    async def create(self, *, token: str, username: str) -> tuple[str, Session]:
        """A new session for `token`: its cookie value (shown to nobody but the browser) and the session."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        key = _key(session_id)
        record = StoredSession(
            key=key,
            sealed=seal(session_id, token, row_key=key),
            username=username,
            expires_at=now + self.ttl_s,
        )
        await self.rows.put_console_session(record)
        await self.rows.prune_console_sessions(now=now, limit=100)  # expired rows go as new ones come
        return session_id, _session(session_id, record, token)

    async def get(self, session_id: str | None) -> Session | None:
        """The live session behind a cookie value (None when unknown, expired, or signed out)."""
        if not session_id or len(session_id) > _MAX_ID:
            return None
        key = _key(session_id)
        record = await self.rows.get_console_session(key, now=self._clock())
        if record is None:
            return None
        token = unseal(session_id, record.sealed, row_key=key)
        return None if token is None else _session(session_id, record, token)

    async def drop(self, session_id: str | None) -> None:
        if session_id and len(session_id) <= _MAX_ID:
            await self.rows.drop_console_session(_key(session_id))


def _session(session_id: str, record: StoredSession, token: str) -> Session:
    return Session(
        token=token, csrf=csrf_token(session_id), username=record.username, expires_at=record.expires_at
    )


def cookie_header(name: str, value: str, *, max_age: int, path: str = COOKIE_PATH) -> str:
    """A Set-Cookie value no script can read (HttpOnly), sent only over HTTPS (Secure; browsers treat
    loopback as secure) and never on a cross-site request (SameSite=Strict)."""
    return f"{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; Secure; SameSite=Strict"
