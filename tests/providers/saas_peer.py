"""A loopback peer speaking the wire formats of Slack, GitHub, Notion, Stripe and Google (OAuth2 token
endpoint, Sheets v4, Drive v3), for the built-in connector tests. Real HTTP on 127.0.0.1, in-memory state.

Each provider lives under its own prefix (`/slack/api`, `/github`, `/notion/v1`, `/stripe/v1`, `/google/...`)
and checks its own credential; a wrong one gets the provider's own 401 shape, which quotes the credential
it was sent (as careless providers do) so tests can prove the connector never repeats an error body whole.
`peer.fail_next(provider, status, ...)` queues an error answer (a 429 with Retry-After, a 500, a Slack
`ok: false`); `peer.requests` records every request.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.conftest import free_port

SLACK_TOKEN = "xoxb-Canary-slack-5e1d"
GITHUB_TOKEN = "ghp_Canary_github_77aa"
NOTION_TOKEN = "secret_Canary_notion_31f0"
STRIPE_KEY = "sk_test_Canary_stripe_9c2b"
GOOGLE_CLIENT_ID = "client-123.apps.googleusercontent.com"
GOOGLE_CLIENT_SECRET = "GOCSPX-Canary-google-secret"
GOOGLE_REFRESH_TOKEN = "1//Canary-google-refresh"
CANARIES = (SLACK_TOKEN, GITHUB_TOKEN, NOTION_TOKEN, STRIPE_KEY, GOOGLE_CLIENT_SECRET, GOOGLE_REFRESH_TOKEN)


@dataclass
class Fault:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class SaasPeer:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    faults: dict[str, deque[Fault]] = field(default_factory=lambda: defaultdict(deque))
    # state
    slack_messages: list[dict[str, Any]] = field(default_factory=list)
    issues: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    comments: list[dict[str, Any]] = field(default_factory=list)
    notion_pages: list[dict[str, Any]] = field(default_factory=list)
    notion_blocks: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    refunds: list[dict[str, Any]] = field(default_factory=list)
    sheets: dict[str, list[list[Any]]] = field(default_factory=dict)
    access_tokens: list[str] = field(default_factory=list)
    token_lifetime_s: int = 3600
    revoked_access: set[str] = field(default_factory=set)

    def fail_next(self, provider: str, status: int, body: Any = None, **headers: str) -> None:
        self.faults[provider].append(Fault(status=status, body=body, headers=dict(headers)))

    def base(self, provider: str) -> str:
        return {
            "slack": f"{self.url}/slack/api",
            "github": f"{self.url}/github/api/v3",
            "notion": f"{self.url}/notion/v1",
            "stripe": f"{self.url}/stripe/v1",
            "google_token": f"{self.url}/google/token",
            "sheets": f"{self.url}/google/sheets/v4",
            "drive": f"{self.url}/google/drive/v3",
        }[provider]


def build_app(peer: SaasPeer) -> Starlette:
    async def record(request: Request, provider: str) -> tuple[bytes, Response | None]:
        body = await request.body()
        peer.requests.append(
            {
                "provider": provider,
                "method": request.method,
                "path": request.url.path,
                "query": dict(request.query_params),
                "headers": dict(request.headers),
                "body": body,
            }
        )
        queue = peer.faults.get(provider)
        if queue:
            fault = queue.popleft()
            return body, JSONResponse(fault.body, status_code=fault.status, headers=fault.headers)
        return body, None

    def bearer(request: Request) -> str:
        value = request.headers.get("authorization", "")
        return value[7:] if value.startswith("Bearer ") else value

    # Slack Web API ------------------------------------------------------------------------------------
    async def slack(request: Request) -> Response:
        body, fault = await record(request, "slack")
        if fault:
            return fault
        if bearer(request) != SLACK_TOKEN:
            return JSONResponse({"ok": False, "error": "invalid_auth", "token": bearer(request)})
        method = request.path_params["method"]
        if method == "auth.test":
            return JSONResponse({"ok": True, "team": "Peer Team", "user": "agent-bot"})
        if method == "conversations.list":
            channels = [
                {"id": "C001", "name": "general", "is_private": False, "topic": {"value": "all"}},
                {"id": "C002", "name": "alerts", "is_private": False, "topic": {"value": "pager"}},
                {"id": "G003", "name": "ops", "is_private": True, "topic": {"value": ""}},
            ]
            limit = int(request.query_params.get("limit", "100"))
            start = int(request.query_params.get("cursor") or 0)
            page = channels[start : start + limit]
            following = start + limit
            cursor = str(following) if following < len(channels) else ""
            return JSONResponse({"ok": True, "channels": page, "response_metadata": {"next_cursor": cursor}})
        if method == "chat.postMessage":
            data = json.loads(body or b"{}")
            if data.get("channel") not in ("C001", "C002", "G003", "general", "alerts"):
                return JSONResponse({"ok": False, "error": "channel_not_found"})
            if not data.get("text"):
                return JSONResponse({"ok": False, "error": "no_text"})
            ts = f"{time.time():.6f}"
            peer.slack_messages.append({**data, "ts": ts})
            return JSONResponse(
                {"ok": True, "channel": data["channel"], "ts": ts, "message": {"text": data["text"]}}
            )
        return JSONResponse({"ok": False, "error": "unknown_method"}, status_code=404)

    # GitHub REST ------------------------------------------------------------------------------------------
    async def github(request: Request) -> Response:
        body, fault = await record(request, "github")
        if fault:
            return fault
        if bearer(request) != GITHUB_TOKEN:
            return JSONResponse(
                {
                    "message": f"Bad credentials {bearer(request)}",
                    "documentation_url": "https://docs.github.com/rest",
                },
                status_code=401,
            )
        path = request.path_params["path"]
        parts = path.strip("/").split("/")
        if parts == ["user"]:
            return JSONResponse({"login": "agent-bot"})
        if len(parts) >= 4 and parts[0] == "repos" and parts[3] == "issues":
            repo = f"{parts[1]}/{parts[2]}"
            if repo != "acme/widgets":
                return JSONResponse({"message": "Not Found", "documentation_url": "x"}, status_code=404)
            issues = peer.issues[repo]
            if len(parts) == 4 and request.method == "GET":
                state = request.query_params.get("state", "open")
                chosen = [i for i in reversed(issues) if state == "all" or i["state"] == state]
                return JSONResponse(chosen[: int(request.query_params.get("per_page", "30"))])
            if len(parts) == 4 and request.method == "POST":
                data = json.loads(body)
                if not str(data.get("title", "")).strip():
                    return JSONResponse(
                        {
                            "message": "Validation Failed",
                            "errors": [{"field": "title", "code": "missing_field"}],
                        },
                        status_code=422,
                    )
                issue = {
                    "number": len(issues) + 1,
                    "title": data["title"],
                    "body": data.get("body"),
                    "state": "open",
                    "labels": [{"name": n} for n in data.get("labels", [])],
                    "user": {"login": "agent-bot"},
                    "comments": 0,
                    "html_url": f"https://github.example/acme/widgets/issues/{len(issues) + 1}",
                    "created_at": "2026-01-01T00:00:00Z",
                }
                issues.append(issue)
                return JSONResponse(issue, status_code=201)
            number = int(parts[4]) if len(parts) > 4 and parts[4].isdigit() else 0
            found = next((i for i in issues if i["number"] == number), None)
            if found is None:
                return JSONResponse({"message": "Not Found", "documentation_url": "x"}, status_code=404)
            if len(parts) == 5:
                return JSONResponse(found)
            if len(parts) == 6 and parts[5] == "comments" and request.method == "POST":
                comment = {
                    "id": 9000 + len(peer.comments),
                    "body": json.loads(body)["body"],
                    "issue": number,
                    "html_url": "https://github.example/c",
                    "created_at": "2026-01-01T00:00:00Z",
                }
                peer.comments.append(comment)
                found["comments"] += 1
                return JSONResponse(comment, status_code=201)
        return JSONResponse({"message": "Not Found", "documentation_url": "x"}, status_code=404)

    # Notion -----------------------------------------------------------------------------------------------
    def notion_error(status: int, code: str, message: str) -> Response:
        return JSONResponse(
            {"object": "error", "status": status, "code": code, "message": message}, status_code=status
        )

    async def notion(request: Request) -> Response:
        body, fault = await record(request, "notion")
        if fault:
            return fault
        if bearer(request) != NOTION_TOKEN:
            return notion_error(401, "unauthorized", f"API token is invalid: {bearer(request)}")
        if request.headers.get("notion-version") != "2022-06-28":
            return notion_error(400, "missing_version", "Notion-Version header failed validation")
        path = request.path_params["path"].strip("/")
        data = json.loads(body) if body else {}
        if path == "users/me":
            return JSONResponse({"object": "user", "id": "u1", "name": "agent-bot"})
        if path == "search":
            query = (data.get("query") or "").lower()
            pages = [p for p in peer.notion_pages if query in p["_title"].lower()]
            return JSONResponse(
                {
                    "object": "list",
                    "results": [_public(p) for p in pages],
                    "has_more": False,
                    "next_cursor": None,
                }
            )
        if path.startswith("databases/") and path.endswith("/query"):
            database = path.split("/")[1]
            if database != "db1":
                return notion_error(404, "object_not_found", f"Could not find database with ID: {database}.")
            rows = [p for p in peer.notion_pages if p["parent"].get("database_id") == "db1"]
            size = data.get("page_size", 100)
            return JSONResponse(
                {
                    "object": "list",
                    "results": [_public(p) for p in rows[:size]],
                    "has_more": len(rows) > size,
                    "next_cursor": None,
                }
            )
        if path == "pages" and request.method == "POST":
            parent = data.get("parent") or {}
            if parent.get("database_id") not in (None, "db1"):
                return notion_error(404, "object_not_found", "Could not find database")
            title = "".join(
                t.get("text", {}).get("content", "")
                for prop in (data.get("properties") or {}).values()
                if isinstance(prop, dict)
                for t in prop.get("title", [])
            )
            data["properties"] = {
                name: _typed_title(prop) if isinstance(prop, dict) and "title" in prop else prop
                for name, prop in (data.get("properties") or {}).items()
            }
            page = {
                "object": "page",
                "id": f"page-{len(peer.notion_pages) + 1}",
                "parent": parent,
                "properties": data.get("properties"),
                "_title": title,
                "url": f"https://notion.example/page-{len(peer.notion_pages) + 1}",
                "created_time": "2026-01-01T00:00:00.000Z",
                "last_edited_time": "2026-01-01T00:00:00.000Z",
            }
            peer.notion_pages.append(page)
            return JSONResponse(_public(page))
        if path.startswith("blocks/") and path.endswith("/children") and request.method == "PATCH":
            block = path.split("/")[1]
            children = data.get("children") or []
            peer.notion_blocks[block].extend(children)
            return JSONResponse({"object": "list", "results": children})
        return notion_error(400, "invalid_request_url", "Invalid request URL.")

    # Stripe -----------------------------------------------------------------------------------------------
    def stripe_error(status: int, kind: str, message: str, **extra: Any) -> Response:
        return JSONResponse({"error": {"type": kind, "message": message, **extra}}, status_code=status)

    charges = [
        {
            "id": "ch_1",
            "amount": 5000,
            "amount_refunded": 0,
            "currency": "eur",
            "status": "succeeded",
            "paid": True,
            "refunded": False,
            "created": 1700000000,
            "description": "order 1",
            "customer": "cus_1",
        },
        {
            "id": "ch_2",
            "amount": 1200,
            "amount_refunded": 0,
            "currency": "eur",
            "status": "succeeded",
            "paid": True,
            "refunded": False,
            "created": 1700000100,
            "description": "order 2",
            "customer": "cus_2",
        },
    ]

    async def stripe(request: Request) -> Response:
        body, fault = await record(request, "stripe")
        if fault:
            return fault
        if bearer(request) != STRIPE_KEY:
            return stripe_error(401, "invalid_request_error", f"Invalid API Key provided: {bearer(request)}")
        path = request.path_params["path"].strip("/")
        if path == "balance":
            return JSONResponse({"object": "balance", "available": []})
        if path.startswith("customers/"):
            customer = path.split("/")[1]
            if customer != "cus_1":
                return stripe_error(
                    404,
                    "invalid_request_error",
                    f"No such customer: '{customer}'",
                    code="resource_missing",
                    param="id",
                )
            return JSONResponse(
                {
                    "id": "cus_1",
                    "object": "customer",
                    "name": "Ada",
                    "email": "ada@example.test",
                    "balance": 0,
                    "currency": "eur",
                    "delinquent": False,
                    "created": 1690000000,
                }
            )
        if path == "charges":
            customer = request.query_params.get("customer")
            chosen = [c for c in charges if customer in (None, c["customer"])]
            limit = int(request.query_params.get("limit", "10"))
            return JSONResponse({"object": "list", "data": chosen[:limit], "has_more": len(chosen) > limit})
        if path == "refunds" and request.method == "POST":
            if request.headers.get("content-type", "").split(";")[0] != "application/x-www-form-urlencoded":
                return stripe_error(400, "invalid_request_error", "Invalid request: expected form encoding")
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            charge = next((c for c in charges if c["id"] == form.get("charge")), None)
            if charge is None:
                return stripe_error(404, "invalid_request_error", "No such charge", code="resource_missing")
            amount = int(form.get("amount", charge["amount"] - charge["amount_refunded"]))
            if amount > charge["amount"] - charge["amount_refunded"]:
                return stripe_error(
                    400,
                    "invalid_request_error",
                    "Refund amount is greater than unrefunded amount on charge",
                    code="amount_too_large",
                )
            charge["amount_refunded"] += amount
            refund = {
                "id": f"re_{len(peer.refunds) + 1}",
                "object": "refund",
                "amount": amount,
                "currency": "eur",
                "status": "succeeded",
                "charge": charge["id"],
                "payment_intent": None,
                "reason": form.get("reason"),
                "idempotency_key": request.headers.get("idempotency-key"),
            }
            peer.refunds.append(refund)
            return JSONResponse(refund)
        return stripe_error(404, "invalid_request_error", f"Unrecognized request URL (GET: /v1/{path})")

    # Google -----------------------------------------------------------------------------------------------
    def google_error(status: int, message: str, kind: str) -> Response:
        return JSONResponse(
            {"error": {"code": status, "message": message, "status": kind}}, status_code=status
        )

    async def google_token(request: Request) -> Response:
        body, fault = await record(request, "google_token")
        if fault:
            return fault
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if form.get("grant_type") != "refresh_token":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        if form.get("client_id") != GOOGLE_CLIENT_ID or form.get("client_secret") != GOOGLE_CLIENT_SECRET:
            return JSONResponse(
                {"error": "invalid_client", "error_description": "The OAuth client was not found."},
                status_code=401,
            )
        if form.get("refresh_token") != GOOGLE_REFRESH_TOKEN:
            return JSONResponse(
                {
                    "error": "invalid_grant",
                    "error_description": f"Token has been expired or revoked: {form.get('refresh_token')}",
                },
                status_code=400,
            )
        token = f"ya29.access-{len(peer.access_tokens) + 1}"
        peer.access_tokens.append(token)
        return JSONResponse(
            {
                "access_token": token,
                "expires_in": peer.token_lifetime_s,
                "token_type": "Bearer",
                "scope": "https://www.googleapis.com/auth/drive.readonly",
            }
        )

    def google_auth(request: Request) -> Response | None:
        token = bearer(request)
        if token not in peer.access_tokens or token in peer.revoked_access:
            return google_error(401, "Request had invalid authentication credentials.", "UNAUTHENTICATED")
        return None

    async def sheets(request: Request) -> Response:
        body, fault = await record(request, "sheets")
        if fault:
            return fault
        if (denied := google_auth(request)) is not None:
            return denied
        sheet, cells = request.path_params["sheet"], request.path_params["cells"]
        if sheet not in peer.sheets:
            return google_error(404, "Requested entity was not found.", "NOT_FOUND")
        rows = peer.sheets[sheet]
        if cells.endswith(":append") and request.method == "POST":
            values = json.loads(body)["values"]
            rows.extend(values)
            updated = f"Sheet1!A{len(rows)}:{chr(64 + len(values[0]))}{len(rows)}"
            return JSONResponse(
                {"spreadsheetId": sheet, "updates": {"updatedRange": updated, "updatedCells": len(values[0])}}
            )
        return JSONResponse({"range": cells, "majorDimension": "ROWS", "values": rows})

    files = {
        "f1": {
            "id": "f1",
            "name": "report.txt",
            "mimeType": "text/plain",
            "size": "11",
            "modifiedTime": "2026-01-01T00:00:00Z",
            "_content": "hello drive",
        },
        "d1": {
            "id": "d1",
            "name": "Plan",
            "mimeType": "application/vnd.google-apps.document",
            "modifiedTime": "2026-01-02T00:00:00Z",
            "_content": "the plan, as text",
        },
    }

    async def drive(request: Request) -> Response:
        _, fault = await record(request, "drive")
        if fault:
            return fault
        if (denied := google_auth(request)) is not None:
            return denied
        path = request.path_params["path"].strip("/").split("/")
        public = [{k: v for k, v in f.items() if not k.startswith("_")} for f in files.values()]
        if path == ["files"]:
            q = request.query_params.get("q", "")
            chosen = [f for f in public if not q or q.split("'")[1] in f["name"]] if "'" in q else public
            return JSONResponse({"files": chosen[: int(request.query_params.get("pageSize", "100"))]})
        if len(path) >= 2 and path[0] == "files":
            found = files.get(path[1])
            if found is None:
                return google_error(404, f"File not found: {path[1]}.", "NOT_FOUND")
            if len(path) == 3 and path[2] == "export":
                return PlainTextResponse(found["_content"])
            if request.query_params.get("alt") == "media":
                return PlainTextResponse(found["_content"])
            return JSONResponse({k: v for k, v in found.items() if not k.startswith("_")})
        return google_error(404, "Not Found", "NOT_FOUND")

    return Starlette(
        routes=[
            Route("/slack/api/{method}", slack, methods=["GET", "POST"]),
            Route("/github/api/v3/{path:path}", github, methods=["GET", "POST", "PATCH"]),
            Route("/notion/v1/{path:path}", notion, methods=["GET", "POST", "PATCH"]),
            Route("/stripe/v1/{path:path}", stripe, methods=["GET", "POST"]),
            Route("/google/token", google_token, methods=["POST"]),
            Route(
                "/google/sheets/v4/spreadsheets/{sheet}/values/{cells:path}", sheets, methods=["GET", "POST"]
            ),
            Route("/google/drive/v3/{path:path}", drive, methods=["GET"]),
        ]
    )


def _typed_title(prop: dict[str, Any]) -> dict[str, Any]:
    """A title property as Notion returns it: typed, each rich text with its plain_text."""
    texts = [{**t, "plain_text": t.get("text", {}).get("content", "")} for t in prop["title"]]
    return {**prop, "type": "title", "title": texts}


def _public(page: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in page.items() if not k.startswith("_")}


@contextlib.contextmanager
def running_app(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port, in a thread, for the block; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the loopback server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def running_saas_peer() -> Iterator[SaasPeer]:
    """The SaaS peer on a free loopback port, in a thread, for the block."""
    peer = SaasPeer()
    with running_app(build_app(peer)) as url:
        peer.url = url
        yield peer
