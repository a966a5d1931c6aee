"""A bearer token that may rotate: read from a mounted file and read again when the file changes.

Kubernetes updates a mounted Secret in place (the kubelet swaps the volume's `..data` link), at its own pace
in each pod, so during a rotation some components hold the new token and some still the old one. Two rules
make such a rolling change drop no call:

- a receiver accepts the token it read last and, for a grace period after it changed, the one before it;
- a sender refused with 401 sends the same request again with each other token it knows (its file read
  again, then the previous token while in grace). A 401 comes from the receiver's token guard before any
  handler ran, so sending again can never run anything twice.

Nothing here logs or raises with a token's value: messages name the file and the setting only.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

logger = logging.getLogger(__name__)

GRACE_ENV = "RUNTIME_TOKEN_GRACE_S"
DEFAULT_GRACE_S = 600.0
# How often the file is looked at (a stat) on the request path; a token no one knows looks at once.
CHECK_INTERVAL_S = 1.0
_RECHECK_ON_MISS_S = 0.1


class TokenSettingError(ValueError):
    """A token setting is malformed; the message names the variable and the fix."""


def grace_from_env(env: Mapping[str, str], name: str = GRACE_ENV, default: float = DEFAULT_GRACE_S) -> float:
    """Seconds the previous token stays accepted after a change (0: not at all)."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise TokenSettingError(f"{name}={raw!r} is not a number of seconds; write 0 or more, e.g. 600")
    return value


class RotatingToken:
    """One bearer token, as a sender presents it and a receiver checks it, following its file.

    `value` is the token as first read (the caller's start-up check reports a missing or empty file with
    the right setting's name); `path`, when given, is read again whenever its signature changes. An
    unreadable or empty file during a change keeps the last good token in service.
    """

    def __init__(
        self,
        value: str,
        *,
        path: str | Path | None = None,
        setting: str = "",
        what: str = "runtime token",
        grace_s: float = DEFAULT_GRACE_S,
        check_interval_s: float = CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not value:
            raise TokenSettingError(f"{setting or what}: the {what} is empty; put the token in it")
        self._path = Path(path) if path is not None else None
        self._setting = setting
        self._what = what
        self._grace_s = grace_s
        self._check_interval_s = check_interval_s
        self._clock = clock
        self._lock = threading.Lock()  # tool bodies and sync SDK calls read it from worker threads
        self._current = value
        self._current_b = value.encode("utf-8")
        self._previous: str | None = None
        self._previous_b = b""
        self._previous_until = 0.0
        self._looked = clock()
        self._signature = self._stat()
        self._reported: str | None = None

    def __repr__(self) -> str:
        return f"RotatingToken({self._where()})"  # never the value

    # -- what senders and receivers ask

    def current(self) -> str:
        """The token to send now."""
        self._look()
        return self._current

    def accepted(self) -> tuple[str, ...]:
        """Every token a receiver accepts now: the current one, then the previous one while in grace."""
        self._look()
        previous = self._previous_in_grace()
        return (self._current,) if previous is None else (self._current, previous)

    def accepts(self, presented: bytes) -> bool:
        """Constant-time check of a presented token; an unknown one makes the file be looked at again first
        (a sender may have seen the change before this process did)."""
        self._look()
        if self._matches(presented):
            return True
        if self._path is None:
            return False
        self._look(force=True)
        return self._matches(presented)

    def alternatives(self, refused: str) -> tuple[str, ...]:
        """For a sender whose `refused` token got a 401: the other tokens worth one more try, in order."""
        self._look(force=True)
        candidates = (self._current, self._previous_in_grace())
        out: list[str] = []
        for token in candidates:
            if token and token != refused and token not in out:
                out.append(token)
        return tuple(out)

    def refresh(self) -> bool:
        """Look at the file now; True when the token changed."""
        before = self._current
        self._look(force=True, min_interval_s=0.0)
        return self._current != before

    # -- internals

    def _matches(self, presented: bytes) -> bool:
        previous = self._previous_in_grace()
        ok = hmac.compare_digest(presented, self._current_b)
        # Both comparisons always run: the time taken says nothing about which token matched.
        ok_previous = hmac.compare_digest(presented, self._previous_b if previous is not None else b"\0")
        return ok or (previous is not None and ok_previous)

    def _previous_in_grace(self) -> str | None:
        previous = self._previous
        if previous is None:
            return None
        if self._clock() < self._previous_until:
            return previous
        with self._lock:
            expired = self._previous is previous
            if expired:
                self._previous, self._previous_b = None, b""
        if expired:
            logger.info("%s: the previous %s is no longer accepted", self._where(), self._what)
        return None

    def _where(self) -> str:
        if self._path is None:
            return self._setting or self._what
        return f"{self._setting}={self._path}" if self._setting else str(self._path)

    def _stat(self) -> tuple[int, int, int, int] | None:
        if self._path is None:
            return None
        try:
            st = os.stat(self._path)  # follows the kubelet's `..data` link to the file now in place
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)

    def _look(self, *, force: bool = False, min_interval_s: float = _RECHECK_ON_MISS_S) -> None:
        if self._path is None:
            return
        now = self._clock()
        wait = min_interval_s if force else self._check_interval_s
        if now - self._looked < wait:
            return
        with self._lock:
            if now - self._looked < wait:
                return
            self._looked = now
            signature = self._stat()
            if signature is None:
                self._report("the file cannot be read")
                return
            if signature == self._signature:
                return
            try:
                text = self._path.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                self._report(f"the file cannot be read ({type(exc).__name__})")
                return
            if not text:
                self._report("the file is empty")  # half-written: the last good token stays in service
                return
            self._signature = signature
            self._reported = None
            if text == self._current:
                return
            self._previous, self._previous_b = self._current, self._current_b
            self._previous_until = now + self._grace_s
            self._current, self._current_b = text, text.encode("utf-8")
        logger.info(
            "%s: the %s changed; the previous one stays accepted for %.0f s",
            self._where(),
            self._what,
            self._grace_s,
        )

    def _report(self, problem: str) -> None:
        if self._reported != problem:  # once per problem, not once per request
            self._reported = problem
            logger.warning("%s: %s; the %s read before stays in service", self._where(), problem, self._what)


TokenLike = str | RotatingToken


def as_rotating(token: TokenLike) -> RotatingToken:
    """A plain string is a token that never changes."""
    return token if isinstance(token, RotatingToken) else RotatingToken(token)
