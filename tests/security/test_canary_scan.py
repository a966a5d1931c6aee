"""Issue 27, item 3: credentials leave the Tool Pod in no encoding, even when every provider echoes them.

Real processes on loopback: the OE, the AER and the Tool Pod (the launcher in each mode), a chat-completions
peer, a provider that echoes every request whole and in every encoding (tests/providers/canary_echo.py) in
200 and error answers, and a real MCP server whose tools quote the bearer they got. One connector of each
kind holds its own canary credential: OpenAPI with bearer, basic, query key and header key; the built-in
http, webhook, slack, github, notion, stripe, google, email and postgres types; MCP; a tenant tool that
returns its secret encoded and split; and a local tool in the AER that returns the runtime token (the OE's
own guard).

Two governed turns run (every tool called directly, then the same tools driven by the model), and every
place a credential could end up is scanned for every canary in every form: the executions, the list, the
audit, the events, the OE's SQLite store (replay cache included), what the model peer received, and every
process log. Zero hits.

email runs against an SMTP peer that refuses the message quoting the password raw, as AUTH PLAIN's base64
and as hex; postgres against a PostgreSQL stand-in that asks for the password in clear text and refuses the
login quoting it (a real server never does: SCRAM sends a proof). Not echoable: mysql (caching_sha2 sends a
scramble, never the password; the clear-text plugin needs TLS); webhook sends only an HMAC of its secret,
which is scanned for anyway.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest

from agent_runtime.connectors import (
    build_bundle,
    compile_catalog,
    materialize_connector,
    scaffold_tool_yaml,
    write_bundle,
)
from agent_runtime.connectors.builtin.registry import materialize_builtin
from agent_runtime.connectors.mcp.catalog import server_id_for_name
from agent_runtime.mcp_servers import mcp_server_connectors
from tests.conftest import Process
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, LLM_KEY, RUNTIME_TOKEN, Platform, Tenant
from tests.providers.canary_echo import (
    RunningCanaryEcho,
    running_canary_echo,
    running_echo_postgres,
    running_echo_smtp,
)
from tests.providers.llm_peer import RunningLLMPeer, Turn, running_llm_peer
from tests.providers.mcp_peer import McpPeer, mcp_server

pytestmark = pytest.mark.security

TENANT_DIR = Path(__file__).resolve().parent / "tenant"

# One canary per credential, each with characters every encoder treats differently ('/', '+', '=', '~').
CANARIES: dict[str, tuple[str, str]] = {  # env name -> (connector kind, value)
    "BEARER_TOKEN": ("openapi-bearer", "Cnry/bearer+tok=9f3e~A1"),
    "BASIC_TOKEN": ("openapi-basic", "canary-user:Pa55/w+rd=basic~7c"),
    "QKEY_TOKEN": ("openapi-query-key", "Qk/ey+canary=7d2e91~x"),
    "HKEY_TOKEN": ("openapi-header-key", "Hk/ey+canary=41bb07~y"),
    "HTTP_TOKEN": ("builtin-http", "Http/canary+tok=0aa1~z"),
    "WEBHOOK_SECRET": ("builtin-webhook", "Whk/canary+sec=5e5e~w"),
    "SLACK_TOKEN": ("builtin-slack", "xoxb-canary/slack+tok=11aa"),
    "GITHUB_TOKEN": ("builtin-github", "ghp_canary/github+tok=22bb"),
    "NOTION_TOKEN": ("builtin-notion", "secret_canary/notion+tok=33cc"),
    "STRIPE_KEY": ("builtin-stripe", "sk_test_canary/stripe+key=44dd"),
    "GOOGLE_CLIENT_SECRET": ("builtin-google", "GOCSPX-canary/google+sec=55ee"),
    "GOOGLE_REFRESH_TOKEN": ("builtin-google", "1//canary-google+refresh=66ff"),
    "CRM_MCP_TOKEN": ("mcp", "mcp-canary/token+crm=77ab"),
    "MAIL_PASSWORD": ("builtin-email", "Ma1l/canary+pw=88cd~q"),
    "PG_PASSWORD": ("builtin-postgres", "Pg/canary+pw=99ef~r"),
}
OPENAPI_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer"},
    "basic": {"type": "http", "scheme": "basic"},
    "qkey": {"type": "apiKey", "in": "query", "name": "api_key"},
    "hkey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
}
ID8 = server_id_for_name("crm")


def forms(value: str) -> dict[str, str]:
    """Every form of a value a leak could take, built with the standard library (base64 by its core)."""
    data = value.encode()
    out = {
        "raw": value,
        "url": quote(value, safe=""),
        "url-keep-slash": quote(value),
        "form": quote_plus(value, safe=""),
        "form-keep-slash": quote_plus(value, safe="/"),
        "url-lower": quote(value, safe="").replace("%2F", "%2f").replace("%2B", "%2b").replace("%3D", "%3d"),
        "hex": data.hex(),
        "hex-upper": data.hex().upper(),
        "json-escaped": json.dumps(value)[1:-1].replace("/", "\\/"),
    }
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        # The characters that depend on the value's bytes alone, wherever it sits in a longer base64 text.
        core = encoded[-(-8 * offset // 6) : (8 * (offset + len(data))) // 6]
        out[f"base64@{offset}"] = core
        out[f"base64url@{offset}"] = core.replace("+", "-").replace("/", "_")
    return out


def openapi_document(kind: str) -> dict[str, Any]:
    def operation(op_id: str) -> dict[str, Any]:
        return {"get": {"operationId": op_id, "responses": {"200": {"description": "the echo"}}}}

    return {
        "openapi": "3.0.3",
        "info": {"title": f"Canary echo ({kind})", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9"}],
        "components": {"securitySchemes": {kind: OPENAPI_SCHEMES[kind]}},
        "security": [{kind: []}],
        "paths": {f"/echo/{kind}": operation("ok"), f"/fail/401/{kind}": operation("fail")},
    }


def canary_bundle(
    directory: Path,
    *,
    echo: str,
    mcp_port: int,
    smtp: tuple[str, int],
    postgres: tuple[str, int],
    tmp: Path,
) -> Path:
    connectors = []
    for kind in OPENAPI_SCHEMES:
        catalog = compile_catalog(openapi_document(kind), connector_name=kind)
        connectors.append(materialize_connector(scaffold_tool_yaml(catalog, base_url=echo), catalog))
    builtins = [
        materialize_builtin(
            name="api",
            type_name="http",
            config={"base_url": f"{echo}/echo/http", "auth": {"type": "bearer"}},
            credentials={"token": "HTTP_TOKEN"},
        ),
        materialize_builtin(
            name="hook",
            type_name="webhook",
            config={"url": f"{echo}/echo/webhook"},
            credentials={"signing_secret": "WEBHOOK_SECRET"},
        ),
        materialize_builtin(
            name="team-slack",
            type_name="slack",
            config={"base_url": f"{echo}/fail/401/slack"},
            credentials={"token": "SLACK_TOKEN"},
        ),
        materialize_builtin(
            name="gh",
            type_name="github",
            config={"base_url": f"{echo}/fail/401/github"},
            credentials={"token": "GITHUB_TOKEN"},
        ),
        materialize_builtin(
            name="wiki",
            type_name="notion",
            config={"base_url": f"{echo}/fail/401/notion"},
            credentials={"token": "NOTION_TOKEN"},
        ),
        materialize_builtin(
            name="pay",
            type_name="stripe",
            config={"base_url": f"{echo}/fail/402/stripe"},
            credentials={"api_key": "STRIPE_KEY"},
        ),
        materialize_builtin(
            name="docs",
            type_name="google",
            config={
                "client_id": "canary-client.apps.example",
                "token_url": f"{echo}/fail/400/token",
                "sheets_base_url": f"{echo}/echo/sheets",
                "drive_base_url": f"{echo}/echo/drive",
            },
            credentials={"client_secret": "GOOGLE_CLIENT_SECRET", "refresh_token": "GOOGLE_REFRESH_TOKEN"},
        ),
        materialize_builtin(
            name="mailbox",
            type_name="email",
            config={
                "username": "agent@example.test",
                "from_address": "agent@example.test",
                "smtp_host": smtp[0],
                "smtp_port": smtp[1],
                "smtp_security": "none",
            },
            credentials={"password": "MAIL_PASSWORD"},
        ),
        materialize_builtin(
            name="shop-db",
            type_name="postgres",
            config={"host": postgres[0], "port": postgres[1], "database": "shop", "user": "agent"},
            credentials={"password": "PG_PASSWORD"},
        ),
    ]
    config = tmp / "agent.yaml"
    config.write_text(
        "version: 1\nmcp:\n  servers:\n    crm:\n"
        f"      url: http://127.0.0.1:{mcp_port}/mcp\n      auth: {{token_env: CRM_MCP_TOKEN}}\n"
    )
    builtins += mcp_server_connectors(config, env={"CRM_MCP_TOKEN": CANARIES["CRM_MCP_TOKEN"][1]})
    return write_bundle(build_bundle(connectors, builtins), directory)


CALLS: list[tuple[str, dict[str, Any]]] = [
    *((f"{kind}_{op}", {}) for kind in OPENAPI_SCHEMES for op in ("ok", "fail")),
    ("http.call", {"method": "POST", "path": "/x", "query": {"q": "1"}, "json": {"a": 1}}),
    ("http.call", {"method": "GET", "path": "/fail/403"}),
    ("webhook.send", {"payload": {"hello": "world"}}),
    ("slack.list_channels", {}),
    ("github.list_issues", {"owner": "acme", "repo": "widgets"}),
    ("notion.search", {}),
    ("stripe.list_charges", {}),
    ("gdrive.list_files", {}),
    ("email.send", {"to": ["ada@example.test"], "subject": "report", "body": "all green"}),
    ("postgres.query", {"sql": "SELECT 1"}),
    (f"mcp.{ID8}.echo_auth", {}),
    (f"mcp.{ID8}.echo_auth_fail", {}),
    ("env_echo", {"name": "BEARER_TOKEN"}),
    ("runtime_token_echo", {}),
]


@pytest.fixture
def echo() -> Iterator[RunningCanaryEcho]:
    with running_canary_echo() as provider:
        yield provider


@pytest.fixture
def llm_peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as peer:
        yield peer


@pytest.fixture
def smtp() -> Iterator[tuple[str, int]]:
    with running_echo_smtp() as address:
        yield address


@pytest.fixture
def postgres() -> Iterator[tuple[str, int]]:
    with running_echo_postgres() as address:
        yield address


@pytest.fixture
def mcp_peer() -> Iterator[McpPeer]:
    with mcp_server(mode="json", token=CANARIES["CRM_MCP_TOKEN"][1], echo_auth=True) as peer:
        yield peer


@pytest.fixture
def platform(
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    echo: RunningCanaryEcho,
    mcp_peer: McpPeer,
    smtp: tuple[str, int],
    postgres: tuple[str, int],
) -> Platform:
    def bundle(directory: Path, provider_url: str) -> Path:
        return canary_bundle(
            directory, echo=provider_url, mcp_port=mcp_peer.port, smtp=smtp, postgres=postgres, tmp=tmp_path
        )

    tenant = Tenant(
        entrypoint="canary_agent:app",
        pythonpath=TENANT_DIR,
        bundle=bundle,
        tool_env={name: value for name, (_, value) in CANARIES.items()},
    )
    return Platform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=echo.url,
        tenant=tenant,
        policy={"sensitive": "allow"},  # the scan is about what leaves, not about approvals
    ).start()


def events_text(platform: Platform, execution_id: str) -> str:
    """The execution's event stream, read until its end (or 5 s of silence)."""
    chunks: list[str] = []
    with (
        platform.client() as client,
        client.stream("GET", f"/execution/{execution_id}/events", timeout=5) as response,
    ):
        try:
            for line in response.iter_lines():
                chunks.append(line)
                if line.startswith("event: completed") or line.startswith("event: failed"):
                    break
        except httpx.ReadTimeout:
            pass
    return "\n".join(chunks)


def store_text(platform: Platform) -> str:
    """Everything the OE's SQLite store holds (executions, steps and their cached outcomes, audit,
    events), read through SQLite itself and as the files' bytes (WAL included)."""
    database = platform.tmp / "oe" / "oe.sqlite3"
    with sqlite3.connect(database) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = [repr(row) for table in tables for row in conn.execute(f'SELECT * FROM "{table}"')]  # noqa: S608
    files = [path.read_bytes().decode("latin-1") for path in database.parent.glob("oe.sqlite3*")]
    return "\n".join([*rows, *files])


def scan(places: dict[str, str], canaries: dict[str, tuple[str, str]]) -> tuple[int, list[str]]:
    """(how many checks ran, every hit as 'kind/env form in place')."""
    checks, hits = 0, []
    for env, (kind, value) in canaries.items():
        for form_name, form in forms(value).items():
            for place, text in places.items():
                checks += 1
                if form in text:
                    hits.append(f"{kind}/{env} {form_name} in {place}")
    return checks, hits


def test_no_credential_in_any_form_leaves_the_tool_pod(
    platform: Platform, llm_peer: RunningLLMPeer, echo: RunningCanaryEcho, mcp_peer: McpPeer
) -> None:
    # Turn 1: every tool called once, each result kept in the execution's result.
    first = platform.invoke({"mode": "calls", "calls": CALLS})
    view = platform.wait(first, timeout=60)
    assert view["status"] == "completed", view
    results = view["result"]["results"]
    assert len(results) == len(CALLS)

    # Turn 2: the model calls the same tools; their results go into its next request.
    with httpx.Client(base_url=f"http://127.0.0.1:{platform.aer_port}") as aer:
        listed = aer.get("/tools", headers={"authorization": f"Bearer {RUNTIME_TOKEN}"}).json()["tools"]
    model_names = {entry["name"]: entry.get("model_name", entry["name"]) for entry in listed}
    llm_peer.push(Turn.calls(*((model_names[name], args) for name, args in CALLS)), Turn.answer("done"))
    second = platform.invoke({"mode": "llm", "text": "call every tool"})
    view2 = platform.wait(second, timeout=60)
    assert view2["status"] == "completed", view2

    # Each credential did reach its provider (so the echo had something to leak) ...
    seen = json.dumps(echo.requests)
    reached = [env for env, (_, value) in CANARIES.items() if any(f in seen for f in forms(value).values())]
    # (Not seen by the HTTP echo: webhook's secret (only an HMAC is sent), the MCP and SMTP peers' own.)
    others = {"WEBHOOK_SECRET", "CRM_MCP_TOKEN", "MAIL_PASSWORD", "PG_PASSWORD"}
    assert set(CANARIES) - set(reached) <= others, reached
    assert mcp_peer.stats()["calls"].get("echo_auth", 0) == 2

    # ... and nowhere does any of them come back.
    with platform.client() as client:
        listing = client.get("/executions", params={"agent": AGENT, "limit": 50}).text
        audits = {eid: client.get(f"/execution/{eid}/audit").text for eid in (first, second)}
        views = {eid: client.get(f"/execution/{eid}").text for eid in (first, second)}
    model_seen = "\n".join(json.dumps(request.body) for request in llm_peer.requests)
    tool_results = [m for m in llm_peer.requests[-1].body["messages"] if m["role"] == "tool"]
    assert len(tool_results) == len(CALLS)
    time.sleep(0.5)  # the last log lines of the processes
    places = {
        "execution": "\n".join(views.values()),
        "executions-list": listing,
        "audit": "\n".join(audits.values()),
        "events": "\n".join(events_text(platform, eid) for eid in (first, second)),
        "oe-store": store_text(platform),
        "model-requests": model_seen,
        "logs": platform.outputs(),
    }
    for place, text in places.items():
        assert text, f"nothing read from {place}"
    everything = {
        **CANARIES,
        "LOOP_LLM_KEY": ("llm-key", LLM_KEY),
        "RUNTIME_TOKEN": ("runtime-token", RUNTIME_TOKEN),
        "OE_CLIENT_TOKEN": ("client-token", CLIENT_TOKEN),
    }
    checks, hits = scan(places, everything)
    kinds = sorted({kind for kind, _ in everything.values()})
    print(
        f"canary scan: {len(forms('x' * 12))} forms x {len(places)} places x {len(kinds)} connector kinds "
        f"({len(everything)} credentials) = {checks} checks, {len(hits)} hits"
    )
    assert not hits, "\n".join(hits)
    # The echoes were there, redacted: the scan looked at real leaks, not at empty answers.
    assert "[REDACTED]" in places["execution"] and "[REDACTED]" in places["model-requests"]
    assert "env_echo BEARER_TOKEN=[REDACTED] b64=[REDACTED]" in places["logs"]  # the tenant's print
    assert "env_echo BEARER_TOKEN=[REDACTED] hex=[REDACTED]" in places["logs"]  # and its log line
