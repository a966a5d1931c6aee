"""Console sessions: an opaque id in an HttpOnly cookie, the bearer token it stands for kept server-side.

The browser never holds the token in a readable form: the cookie carries only a random id, looked up by its
digest (so the table holds no usable cookie value either). Each session has its own CSRF token, which the
page sends back in a header on every state-changing request. Sessions live in this OE process (bounded,
least recently used dropped first); a restarted OE or another replica asks the person to sign in again.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "ae_console"
LOGIN_COOKIE = "ae_console_login"
COOKIE_PATH = "/console"
DEFAULT_TTL_S = 8 * 3600.0
DEFAULT_MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class Session:
    """One signed-in browser. `token` is the bearer the client API checks on every request."""

    token: str
    csrf: str
    username: str
    expires_at: float

    def csrf_matches(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.csrf.encode())


def _digest(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()


class SessionStore:
    """At most `max_sessions` sessions, each for `ttl_s` from sign-in."""

    def __init__(
        self,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, *, token: str, username: str) -> tuple[str, Session]:
        """A new session for `token`: its cookie value (shown to nobody but the browser) and the session."""
        session_id = secrets.token_urlsafe(32)
        session = Session(
            token=token,
            csrf=secrets.token_urlsafe(32),
            username=username,
            expires_at=self._clock() + self.ttl_s,
        )
        self._sessions[_digest(session_id)] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session behind a cookie value; an expired one is dropped."""
        if not session_id or len(session_id) > 128:
            return None
        key = _digest(session_id)
        session = self._sessions.get(key)
        if session is None:
            return None
        if self._clock() >= session.expires_at:
            del self._sessions[key]
            return None
        self._sessions.move_to_end(key)
        return session

    def drop(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(_digest(session_id), None)


def cookie_header(name: str, value: str, *, max_age: int, path: str = COOKIE_PATH) -> str:
    """A Set-Cookie value no script can read (HttpOnly), sent only over HTTPS (Secure; browsers treat
    loopback as secure) and never on a cross-site request (SameSite=Strict)."""
    return f"{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; Secure; SameSite=Strict"
