"""examples/orders-agent end to end: a model using built-in postgres, slack and webhook connectors through the
real OE, AER and Tool Pod. The model sees `postgres__query`; policy, audit and the suspension name
`postgres.query`; both writes wait for approval; no credential shows up anywhere."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from agent_runtime.connectors import build_bundle, write_bundle
from agent_runtime.connectors.builtin.registry import materialize_builtin
from tests.conftest import REPO_ROOT, Process
from tests.integration.loop.harness import LLM_KEY, Platform, Tenant
from tests.peers.servers import SqlServer
from tests.providers import saas_peer as sp
from tests.providers.llm_peer import RunningLLMPeer, Turn, running_llm_peer
from tests.providers.saas_peer import SaasPeer, running_app

EXAMPLE = REPO_ROOT / "examples" / "orders-agent"
SIGNING_SECRET = "whsec-Canary-orders-77c1"


@pytest.fixture(scope="module")
def orders_db(postgres: SqlServer) -> SqlServer:
    async def setup() -> None:
        admin = await asyncpg.connect(**{**postgres.admin, "database": "postgres"})
        try:
            await admin.execute(f"CREATE DATABASE orders OWNER {postgres.user}")
        finally:
            await admin.close()
        conn = await asyncpg.connect(
            host=postgres.host,
            port=postgres.port,
            user=postgres.user,
            password=postgres.password,
            database="orders",
        )
        try:
            await conn.execute(
                "CREATE TABLE orders (id int PRIMARY KEY, customer text, status text, total_cents int, "
                "updated_at timestamptz DEFAULT now())"
            )
            await conn.execute(
                "INSERT INTO orders VALUES (7, 'Ada', 'shipped', 4200), (8, 'Bob', 'open', 990)"
            )
        finally:
            await conn.close()

    asyncio.run(setup())
    return postgres


@pytest.fixture
def events() -> Iterator[tuple[list[dict[str, Any]], str]]:
    received: list[dict[str, Any]] = []

    async def hook(request: Request) -> Response:
        received.append({"headers": dict(request.headers), "body": await request.body()})
        return PlainTextResponse("ok")

    with running_app(Starlette(routes=[Route("/orders", hook, methods=["POST"])])) as url:
        yield received, f"{url}/orders"


def _bundle_for(*, db: SqlServer, saas: SaasPeer, webhook_url: str) -> Callable[[Path, str], Path]:
    """The example's own agent.yaml entries, pointed at this test's peers."""
    entries = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())["connectors"]
    where = {
        "shop-db": {"host": db.host, "port": db.port, "database": "orders", "user": db.user},
        "team-slack": {"base_url": saas.base("slack")},
        "order-events": {"url": webhook_url},
    }

    def build(directory: Path, _: str) -> Path:
        builtins = [
            materialize_builtin(
                name=e["name"],
                type_name=e["type"],
                config={**e.get("config", {}), **where[e["name"]]},
                credentials=e.get("credentials", {}),
                allow=(e.get("expose") or {}).get("allow"),
            )
            for e in entries
        ]
        return write_bundle(build_bundle([], builtins), directory)

    return build


def _approve(platform: Platform, execution_id: str) -> None:
    with platform.client() as client:
        response = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
    assert response.status_code == 202, response.text


def test_the_orders_agent_reads_posts_and_publishes_with_approval(
    tmp_path: Path,
    spawn: Callable[..., Process],
    orders_db: SqlServer,
    saas: SaasPeer,
    events: tuple[list[dict[str, Any]], str],
) -> None:
    received, webhook_url = events
    tool_env = {
        "SHOP_DB_PASSWORD": orders_db.password,
        "SLACK_BOT_TOKEN": sp.SLACK_TOKEN,
        "ORDER_EVENTS_SIGNING_SECRET": SIGNING_SECRET,
    }
    tenant = Tenant(
        entrypoint="orders_agent.agent:app",
        pythonpath=EXAMPLE,
        bundle=_bundle_for(db=orders_db, saas=saas, webhook_url=webhook_url),
        tool_env=tool_env,
    )
    with running_llm_peer(api_key=LLM_KEY) as llm_peer:
        _run(tmp_path, spawn, llm_peer, tenant, saas=saas, received=received, secrets=tool_env)


def _run(
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    tenant: Tenant,
    *,
    saas: SaasPeer,
    received: list[dict[str, Any]],
    secrets: dict[str, str],
) -> None:
    platform = Platform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url="http://127.0.0.1:9",
        tenant=tenant,
    ).start()
    event = {"type": "order.shipped", "order": 7}
    llm_peer.push(
        Turn.calls(("postgres__query", {"sql": "SELECT id, status FROM orders WHERE id = 7; "})),
        Turn.calls(("slack__post_message", {"channel": "C001", "text": "Order 7 (Ada) has shipped"})),
        Turn.calls(("webhook__send", {"payload": event})),
        Turn.answer("Order 7 has shipped; the team and the event feed know."),
    )
    execution_id = platform.invoke({"text": "Is order 7 shipped? Tell the team and publish it."})

    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    assert view["suspension"]["tool"] == "slack.post_message"  # canonical, as policy and audit see it
    assert saas.slack_messages == []  # nothing ran before the approval
    _approve(platform, execution_id)

    view = platform.wait(execution_id, "suspended", "completed", "failed")
    assert view["status"] == "suspended" and view["suspension"]["tool"] == "webhook.send", view
    assert [m["text"] for m in saas.slack_messages] == ["Order 7 (Ada) has shipped"]
    assert received == []
    _approve(platform, execution_id)

    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"] == {"answer": "Order 7 has shipped; the team and the event feed know."}
    # Each write ran once, although the agent re-ran from the start twice (replayed from the OE's cache).
    assert len(saas.slack_messages) == 1 and len(received) == 1
    body = received[0]["body"]
    headers = received[0]["headers"]
    signed = f"{headers['x-webhook-timestamp']}.".encode() + body
    expected = "sha256=" + hmac.new(SIGNING_SECRET.encode(), signed, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(expected, headers["x-signature-256"]) and json.loads(body) == event

    # The model was offered model names and read the query's rows back.
    first = llm_peer.requests[0].body
    offered = sorted(t["function"]["name"] for t in first["tools"])
    assert offered == ["postgres__query", "slack__list_channels", "slack__post_message", "webhook__send"]
    last = llm_peer.requests[-1].body["messages"]
    assert [
        c["function"]["name"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls", [])
    ] == [
        "postgres__query",
        "slack__post_message",
        "webhook__send",
    ]
    rows = json.loads(next(m["content"] for m in last if m["role"] == "tool"))
    assert rows["rows"] == [[7, "shipped"]] and rows["truncated"] is False

    audit = platform.audit(execution_id)
    tools = {r.get("tool") for r in audit if r.get("kind") == "tool"}
    assert {"postgres.query", "slack.post_message", "webhook.send"} <= tools
    text = platform.outputs() + json.dumps(audit) + json.dumps(view)
    for secret in (*secrets.values(), SIGNING_SECRET):
        assert secret not in text
