"""The MCP OAuth token cache (B-23, L-07): `<dir>/<server>.json`, mode 0600, one writer at a time.

`<dir>` is `AGENTIC_MCP_OAUTH_DIR`, else `~/.agentic/mcp-oauth`. Every refresh happens under an
`fcntl.flock` on `<server>.json.lock`, and the file is read again once the lock is held, so of two processes
refreshing at once the second finds the first one's tokens and does not refresh with a refresh token the
authorization server has just rotated away. The lock dies with its holder's process (the kernel drops it),
so a process that died holding it blocks no one. Writes go to a temporary file renamed into place, so a
reader without the lock sees the old file or the new one, never half of one.

`AGENTIC_MCP_OAUTH_SEED_DIR` (the operator mounts a Secret there, read-only) seeds `<server>.json` the first
time it is missing: the refresh token a person's `agentengine connectors login` or console consent produced.
A seed whose `consented_at` is later than the kept file's wins over it: a person consenting again (the OE
console patches the Secret, the kubelet refreshes the mount) replaces what the Tool Pod keeps, without a
restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from pydantic import ValidationError

from agent_runtime.connectors.mcp.oauth import (
    DIR_ENV,
    SEED_ENV,
    SEED_SECRET_PREFIX,
    CachedServer,
    OAuthError,
    check_server_name,
)

__all__ = ["DIR_ENV", "SEED_ENV", "SEED_SECRET_PREFIX", "TokenStore", "oauth_dir"]

DEFAULT_DIR = "~/.agentic/mcp-oauth"
_POLL_S = 0.02
_MAX_FILE_BYTES = 256 * 1024


def oauth_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get(DIR_ENV) or DEFAULT_DIR).expanduser()


class TokenStore:
    """One server's token file and its lock."""

    def __init__(self, server: str, *, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.server = check_server_name(server)
        self.directory = oauth_dir(env)
        self.path = self.directory / f"{self.server}.json"
        self.lock_path = self.directory / f"{self.server}.json.lock"
        seed = env.get(SEED_ENV)
        self.seed = Path(seed) / f"{self.server}.json" if seed else None
        self._parsed: dict[Path, tuple[tuple[int, ...], CachedServer]] = {}

    def read(self) -> CachedServer | None:
        """The kept state, or the seed's when none is kept yet or the seed holds a newer consent (a person
        consented again: the OE console patched the Secret and the kubelet refreshed the mount); None when
        neither exists. A broken seed beside a good kept file is passed over (the pod keeps working)."""
        kept = self._load(self.path)
        if self.seed is None:
            return kept
        try:
            seeded = self._load(self.seed)
        except OAuthError:
            if kept is None:
                raise
            return kept
        if seeded is not None and (kept is None or (seeded.consented_at or 0) > (kept.consented_at or 0)):
            return seeded
        return kept

    def _load(self, path: Path) -> CachedServer | None:
        """One file's state; a file unchanged since the last read (same inode, size and mtime: every write
        is a new file renamed into place, the kubelet's refresh a new directory) is not parsed again, so a
        call with a good token pays a stat, not a JSON parse."""
        try:
            info = os.stat(path)
            key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
            known = self._parsed.get(path)
            if known is not None and known[0] == key:
                return known[1]
            with path.open("rb") as handle:
                info = os.fstat(handle.fileno())  # the file read, should it be replaced meanwhile
                key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
                raw = handle.read(_MAX_FILE_BYTES)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise OAuthError(
                f"cannot read the OAuth token file for {self.server} ({exc.strerror}); check "
                f"{DIR_ENV}'s permissions",
                category="client_error",
            ) from None
        try:
            state = CachedServer.model_validate(json.loads(raw))
        except (ValueError, ValidationError):
            raise OAuthError(
                f"the OAuth token file for {self.server} is not valid; delete it and run "
                f"`agentengine connectors login {self.server}` (or let client_credentials start again)",
                category="client_error",
            ) from None
        self._parsed[path] = (key, state)
        return state

    def write(self, state: CachedServer) -> None:
        """Atomically, mode 0600 (it holds a refresh token); call it holding the lock."""
        self._ensure_dir()
        body = state.model_dump_json(exclude_none=True).encode()
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)

    @contextlib.asynccontextmanager
    async def locked(self, *, timeout_s: float) -> AsyncIterator[None]:
        """Hold `<server>.json.lock` (exclusive flock), polling without blocking the event loop."""
        self._ensure_dir()
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise OAuthError(
                            f"another process has held the OAuth token lock for {self.server} over "
                            f"{timeout_s:g} s",
                            category="timeout",
                        ) from None
                    await asyncio.sleep(_POLL_S)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _ensure_dir(self) -> None:
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise OAuthError(
                f"cannot create the OAuth token directory ({exc.strerror}); set {DIR_ENV} to a writable "
                "directory",
                category="client_error",
            ) from None
