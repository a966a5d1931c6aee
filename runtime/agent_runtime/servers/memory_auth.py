"""Who may call the Memory server: the Agent's runtime token, or the OE's knowledge statement (issue 37).

"One credential per direction" (docs/design.md): the AER and the Tool Pod present the Agent's runtime
token, as they always have; the OE presents a statement it signs itself (audience `memory`, purpose
`knowledge`, this Agent's workspace, a minute's life), which opens only the routes the OE forwards a
client's documents to. A user's memory stays closed to it: those routes need the runtime token and an
execution's statement (servers/memory.py), and `check_operation` refuses a knowledge statement there too.

401 (the sender tries its next credential): none or a wrong token (an empty body, as the other
components answer), or a statement that does not verify (a forged or unknown key, expired). 403 with a
JSON reason: a statement that verifies but does not open this door (another Agent, another component or
purpose, a route outside the knowledge documents). Nothing here logs a credential.
"""

from __future__ import annotations

import json

from agent_runtime.contract import UNAUTHENTICATED_PATHS
from agent_runtime.execution_token import StatementError, StatementVerifier, looks_like_statement
from agent_runtime.servers.auth import ASGIApp, Receive, Scope, Send
from agent_runtime.token_file import TokenLike, as_rotating

# The paths the OE's client-API routes forward to (servers/oe_knowledge.py): documents in and out, no
# search or chunk reads, which only the Agent's own tools need.
OE_KNOWLEDGE_PATHS = frozenset({"/knowledge/documents"})
KNOWLEDGE_PURPOSES = frozenset({"knowledge"})
_UNAUTHORIZED = [(b"www-authenticate", b"Bearer"), (b"content-length", b"0")]


def _bearer(scope: Scope) -> bytes | None:
    header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
    if header is None:
        return None
    scheme, _, credentials = header.partition(b" ")
    return credentials.strip() if scheme.lower() == b"bearer" else None


def statement_refusal(
    verifier: StatementVerifier | None, presented: str, *, path: str, workspace: str
) -> StatementError | None:
    """Why an OE statement does not open `path` on this Memory server, or None when it does."""
    if verifier is None:
        return StatementError("unknown_key", "this Memory server has no OE public key to verify statements")
    try:
        verifier.verify(
            presented, audience="memory", workspace=workspace or None, purposes=KNOWLEDGE_PURPOSES
        )
    except StatementError as exc:
        return exc
    if path not in OE_KNOWLEDGE_PATHS:
        return StatementError(
            "wrong_route",
            f"the OE's knowledge statement does not open {path}; only the documents",
            status=403,
        )
    return None


class MemoryGuard:
    """Pure ASGI middleware in front of the Memory server's routes (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: TokenLike,
        verifier: StatementVerifier | None,
        workspace: str,
        open_paths: frozenset[str] = UNAUTHENTICATED_PATHS,
    ) -> None:
        self._app = app
        self._tokens = as_rotating(token)
        self._verifier = verifier
        self._workspace = workspace
        self._open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open_paths:
            await self._app(scope, receive, send)
            return
        presented = _bearer(scope)
        if presented is not None and looks_like_statement(presented):
            refused = statement_refusal(
                self._verifier,
                presented.decode("ascii", "replace"),
                path=scope["path"],
                workspace=self._workspace,
            )
            if refused is None:
                await self._app(scope, receive, send)
                return
            status, reason, detail = refused.status, f"statement_{refused.reason}", refused.detail
        elif presented is not None and self._tokens.accepts(presented):
            await self._app(scope, receive, send)
            return
        else:
            # As the other components' token guard: a 401 that says nothing more.
            await send({"type": "http.response.start", "status": 401, "headers": _UNAUTHORIZED})
            await send({"type": "http.response.body", "body": b""})
            return
        body = json.dumps({"error": reason, "detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.insert(0, (b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
