"""Bearer-token authentication between components: the token and the ASGI guard that checks it."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from agent_runtime.contract import TOKEN_ENV, TOKEN_FILE_ENV, TOKEN_FILE_PATH, UNAUTHENTICATED_PATHS
from agent_runtime.token_file import RotatingToken, TokenLike, TokenSettingError, as_rotating, grace_from_env

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class RuntimeTokenError(ValueError):
    """The runtime bearer token is not configured or unreadable; the message says how to provide it."""


def load_runtime_token(env: Mapping[str, str]) -> str:
    """The token from RUNTIME_TOKEN_FILE (the mounted Secret), else RUNTIME_TOKEN (local runs)."""
    file_name = env.get(TOKEN_FILE_ENV, "").strip()
    if file_name:
        path = Path(file_name)
        try:
            token = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise RuntimeTokenError(
                f"{TOKEN_FILE_ENV}={file_name}: no such file; mount the runtime token Secret "
                f"(key 'token') so the file exists (normally {TOKEN_FILE_PATH})"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise RuntimeTokenError(
                f"{TOKEN_FILE_ENV}={file_name}: cannot read it ({type(exc).__name__}); "
                "it must be a readable UTF-8 text file"
            ) from None
        if not token:
            raise RuntimeTokenError(f"{TOKEN_FILE_ENV}={file_name}: the file is empty; put the token in it")
        return token
    token = env.get(TOKEN_ENV, "").strip()
    if token:
        return token
    raise RuntimeTokenError(
        f"no runtime token: set {TOKEN_FILE_ENV} to the mounted token file (normally {TOKEN_FILE_PATH}), "
        f"or {TOKEN_ENV} for a local run"
    )


def rotating_runtime_token(env: Mapping[str, str]) -> RotatingToken:
    """The runtime token as `load_runtime_token` reads it, read again when its mounted file changes, the
    previous one still accepted for RUNTIME_TOKEN_GRACE_S (see agent_runtime/token_file.py)."""
    token = load_runtime_token(env)
    try:
        grace_s = grace_from_env(env)
    except TokenSettingError as exc:
        raise RuntimeTokenError(str(exc)) from None
    file_name = env.get(TOKEN_FILE_ENV, "").strip()
    return RotatingToken(token, path=file_name or None, setting=TOKEN_FILE_ENV, grace_s=grace_s)


def bearer_matches(header: bytes | None, token: bytes) -> bool:
    """Constant-time check of an Authorization header value against the expected token."""
    if header is None:
        return False
    scheme, _, credentials = header.partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    return hmac.compare_digest(credentials.strip(), token)


def _bearer_credentials(header: bytes | None) -> bytes | None:
    if header is None:
        return None
    scheme, _, credentials = header.partition(b" ")
    return credentials.strip() if scheme.lower() == b"bearer" else None


_UNAUTHORIZED_HEADERS = [(b"www-authenticate", b"Bearer"), (b"content-length", b"0")]


class BearerTokenGuard:
    """Pure ASGI middleware: every route but the probes and metrics needs the token; 401 says nothing more."""

    def __init__(
        self, app: ASGIApp, *, token: TokenLike, open_paths: frozenset[str] = UNAUTHENTICATED_PATHS
    ) -> None:
        self._app = app
        # A rotating token: the current one and, in the grace period after a change, the previous one.
        self._tokens = as_rotating(token)
        self._open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open_paths:
            await self._app(scope, receive, send)
            return
        header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
        presented = _bearer_credentials(header)
        if presented is not None and self._tokens.accepts(presented):
            await self._app(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 401, "headers": _UNAUTHORIZED_HEADERS})
        await send({"type": "http.response.body", "body": b""})
