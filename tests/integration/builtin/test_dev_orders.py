"""`agentengine dev examples/orders-agent --db shop-db=postgresql://...` in a pseudo-terminal, against the
Debian PostgreSQL the builtin tier runs: the read-only query runs in the Tool Pod, the password given in the
URL reaches the Tool Pod only and is never printed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from agent_runtime.devloop.children import free_port
from tests.conftest import REPO_ROOT
from tests.integration.devloop.session import DevSession, environ_of
from tests.peers.servers import SqlServer

pytestmark = pytest.mark.integration

EXAMPLE = REPO_ROOT / "examples" / "orders-agent"
DATABASE = "devshop"
QUERY = "SELECT id, status FROM orders WHERE id = 7"


@pytest.fixture(scope="module")
def shop(postgres: SqlServer) -> SqlServer:
    async def setup() -> None:
        admin = await asyncpg.connect(**{**postgres.admin, "database": "postgres"})
        try:
            await admin.execute(f"CREATE DATABASE {DATABASE} OWNER {postgres.user}")
        finally:
            await admin.close()
        conn = await asyncpg.connect(
            host=postgres.host,
            port=postgres.port,
            user=postgres.user,
            password=postgres.password,
            database=DATABASE,
        )
        try:
            await conn.execute("CREATE TABLE orders (id int PRIMARY KEY, status text)")
            await conn.execute("INSERT INTO orders VALUES (7, 'shipped'), (8, 'open')")
        finally:
            await conn.close()

    asyncio.run(setup())
    return postgres


@pytest.fixture(scope="module")
def dev(shop: SqlServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevSession]:
    script: Path = tmp_path_factory.mktemp("script") / "turns.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "postgres__query", "args": {"sql": QUERY}}]},
                {"text": "Order 7 has shipped."},
            ]
        )
    )
    url = f"postgresql://{shop.user}:{shop.password}@{shop.host}:{shop.port}/{DATABASE}"
    session = DevSession.start(
        EXAMPLE, "--model", f"scripted:{script}", "--db", f"shop-db={url}", port=free_port()
    )
    yield session
    session.close()


def test_the_orders_agent_queries_postgres_given_by_url(dev: DevSession, shop: SqlServer) -> None:
    result = dev.cli("invoke", dev.agent, "--text", "Is order 7 shipped?", "--follow")
    assert result.returncode == 0, result.stderr + result.stdout
    execution_id = result.stdout.split()[1]
    view = dev.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"] == {"answer": "Order 7 has shipped."}
    with dev.client() as client:
        audit = client.audit(execution_id)
        finished = [
            event["data"]
            for event in client.events(execution_id, idle_timeout=1)
            if event["type"] == "step_finished" and (event.get("data") or {}).get("tool") == "postgres.query"
        ]
    assert [step["status"] for step in finished] == ["success"], finished
    assert any(r.get("tool") == "postgres.query" and r.get("route") == "tool_pod" for r in audit), audit

    components = dev.components()
    assert environ_of(components["tool"])["SHOP_DB_PASSWORD"] == shop.password
    assert "SHOP_DB_PASSWORD" not in environ_of(components["aer"])
    assert shop.password not in dev.banner + result.stdout + result.stderr
    # The bundle holds the address, never the password (it names the variable that does).
    bundle = "".join(p.read_text() for p in (dev.workdir / "bundle").glob("*") if p.is_file())
    assert str(shop.port) in bundle and shop.password not in bundle
