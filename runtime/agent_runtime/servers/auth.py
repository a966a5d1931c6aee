"""Bearer-token authentication between components: the token and the ASGI guard that checks it."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from agent_runtime.contract import TOKEN_ENV, TOKEN_FILE_ENV, TOKEN_FILE_PATH, UNAUTHENTICATED_PATHS
from agent_runtime.execution_token import (
    Audience,
    StatementError,
    StatementVerifier,
    looks_like_statement,
)
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


STATEMENT_SCOPE_KEY = "agent_engine.statement"


def _refusal(status: int, reason: str, detail: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    body = json.dumps({"error": reason, "detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.insert(0, (b"www-authenticate", b"Bearer"))
    return headers, body


class StatementGuard:
    """Pure ASGI middleware for a runtime the OE calls: a route opens to the OE's signed statement for this
    component (`audience`) and this Agent (`workspace`); the Agent's runtime token opens only the routes
    `token_opens` allows (none on the Tool Pod, so nothing the AER holds reaches it).

    A verified statement's claims go to the handler in `scope["agent_engine.statement"]`. 401: no
    credential, or one that does not verify (a sender tries its other ones); 403 with a JSON reason: a
    credential that verifies but does not open this door (another component, another Agent, the token)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        verifier: StatementVerifier,
        audience: Audience,
        workspace: str | None,
        token: TokenLike | None = None,
        token_opens: Callable[[str], bool] = lambda _path: False,
        open_paths: frozenset[str] = UNAUTHENTICATED_PATHS,
    ) -> None:
        self._app = app
        self._verifier = verifier
        self._audience: Audience = audience
        self._workspace = workspace
        self._tokens = as_rotating(token) if token is not None else None
        self._token_opens = token_opens
        self._open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open_paths:
            await self._app(scope, receive, send)
            return
        header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
        presented = _bearer_credentials(header)
        status, reason, detail = 401, "unauthenticated", "no credential"
        if presented is not None and looks_like_statement(presented):
            try:
                claims = self._verifier.verify(
                    presented.decode("ascii", "replace"), audience=self._audience, workspace=self._workspace
                )
            except StatementError as exc:
                status, reason, detail = exc.status, exc.reason, exc.detail
            else:
                scope[STATEMENT_SCOPE_KEY] = claims
                await self._app(scope, receive, send)
                return
        elif presented is not None and self._tokens is not None and self._tokens.accepts(presented):
            if self._token_opens(scope["path"]):
                await self._app(scope, receive, send)
                return
            status, reason = 403, "oe_statement_required"
            detail = (
                f"the Agent's runtime token does not open {scope['path']} here; only the OE's signed "
                "statement does"
            )
        headers, body = _refusal(status, reason, detail)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
