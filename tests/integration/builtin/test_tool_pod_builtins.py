"""Built-in connectors in the bundle, run by a real Tool Pod (the launcher) beside an OpenAPI-free tenant:
routing, the AER's GET /tools (sensitivity, model names), refusal to start without a credential, and a
canary scan over everything the calls produce (answers, metrics, tool lists, the pods' logs)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from agent_runtime.connectors import build_bundle, write_bundle
from agent_runtime.connectors.builtin.registry import materialize_builtin
from tests.conftest import Process
from tests.integration.runtime.launched import Component, launch, new_port, operator_env
from tests.peers.servers import SqlServer
from tests.providers import saas_peer as sp
from tests.providers.saas_peer import SaasPeer

WRONG_GITHUB_TOKEN = "ghp_Canary_wrong_but_secret_0c1d"  # the peer echoes a refused token in its 401 body


@pytest.fixture(scope="module")
def shop(postgres: SqlServer) -> SqlServer:
    async def setup() -> None:
        conn = await asyncpg.connect(**postgres.admin)
        try:
            await conn.execute("CREATE TABLE IF NOT EXISTS tp_items (id int PRIMARY KEY, name text)")
            await conn.execute(f"ALTER TABLE tp_items OWNER TO {postgres.user}")
            await conn.execute("INSERT INTO tp_items VALUES (1, 'a;b'), (2, 'c') ON CONFLICT DO NOTHING")
        finally:
            await conn.close()

    asyncio.run(setup())
    return postgres


def bundle(tmp_path: Path, *, shop: SqlServer, saas: SaasPeer) -> Path:
    builtins = [
        materialize_builtin(
            name="shop-db",
            type_name="postgres",
            config={"host": shop.host, "port": shop.port, "database": shop.database, "user": shop.user},
            credentials={"password": "SHOP_DB_PASSWORD"},
        ),
        materialize_builtin(
            name="team-slack",
            type_name="slack",
            config={"base_url": saas.base("slack")},
            credentials={"token": "SLACK_TOKEN"},
            allow=["post_message", "slack.list_channels"],
        ),
        materialize_builtin(
            name="gh",
            type_name="github",
            config={"base_url": saas.base("github")},
            credentials={"token": "GITHUB_TOKEN"},
        ),
    ]
    return write_bundle(build_bundle([], builtins), tmp_path / "bundle")


def secret_env(shop: SqlServer) -> dict[str, str]:
    return {
        "SHOP_DB_PASSWORD": shop.password,
        "SLACK_TOKEN": sp.SLACK_TOKEN,
        "GITHUB_TOKEN": WRONG_GITHUB_TOKEN,
    }


@pytest.fixture(scope="module")
def pods(
    tmp_path_factory: pytest.TempPathFactory, shop: SqlServer, saas: SaasPeer
) -> Iterator[tuple[Component, Component]]:
    tmp_path = tmp_path_factory.mktemp("pods")
    index = bundle(tmp_path, shop=shop, saas=saas)
    started: list[Process] = []

    def spawn(argv: list[str], *, env: dict[str, str], name: str) -> Process:
        log_path = tmp_path / f"{name}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        process = Process(argv=argv, popen=popen, log_path=log_path, name=name)
        started.append(process)
        return process

    try:
        tool_env = {
            **operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=index),
            **secret_env(shop),
        }
        aer_env = operator_env(tmp_path, mode="aer", port=new_port(), bundle_index=index)
        yield launch(spawn, tool_env), launch(spawn, aer_env)
    finally:
        for process in started:
            process.stop()


def execute(pod: Component, tool: str, arguments: dict[str, Any], step: int) -> dict[str, Any]:
    with pod.client(timeout=30) as client:
        answer = client.post(
            "/execute", json={"tool": tool, "arguments": arguments, "execution_id": "e1", "step": step}
        )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_tool_pod_routes_builtin_tools(pods: tuple[Component, Component], saas: SaasPeer) -> None:
    tool_pod, _ = pods
    rows = execute(
        tool_pod, "postgres.query", {"sql": "SELECT name FROM tp_items WHERE name = ';' OR id = 1"}, 1
    )
    assert rows["status"] == "success" and rows["result"]["rows"] == [["a;b"]]
    posted = execute(tool_pod, "slack.post_message", {"channel": "C001", "text": "from the pod"}, 2)
    assert posted["status"] == "success" and saas.slack_messages[-1]["text"] == "from the pod"
    refused = execute(tool_pod, "postgres.query", {"sql": "SELECT 1; DROP TABLE tp_items"}, 3)
    assert refused["status"] == "error" and refused["error"]["category"] == "query_refused"
    bad_args = execute(tool_pod, "slack.post_message", {"channel": "C001"}, 4)
    assert bad_args["error"]["category"] == "invalid_arguments"
    not_exposed = execute(tool_pod, "slack.reply_thread", {"thread_ts": "1", "text": "x"}, 5)
    assert not_exposed["error"]["category"] == "unknown_tool"  # expose.allow left it out
    echoed = execute(tool_pod, "github.list_issues", {"owner": "acme", "repo": "widgets"}, 6)
    assert echoed["error"]["category"] == "auth"


def test_aer_lists_builtin_tools_with_sensitivity_and_model_names(pods: tuple[Component, Component]) -> None:
    _, aer = pods
    with aer.client() as client:
        tools = {t["name"]: t for t in client.get("/tools").json()["tools"]}
    assert {n: (t["sensitive"], t["model_name"]) for n, t in tools.items() if "." in n} == {
        "postgres.query": (False, "postgres__query"),
        "postgres.execute": (True, "postgres__execute"),
        "slack.post_message": (True, "slack__post_message"),
        "slack.list_channels": (False, "slack__list_channels"),
        "github.get_issue": (False, "github__get_issue"),
        "github.list_issues": (False, "github__list_issues"),
        "github.create_issue": (True, "github__create_issue"),
        "github.comment_issue": (True, "github__comment_issue"),
    }
    assert all(t["is_local"] is False for n, t in tools.items() if "." in n)


def test_no_credential_anywhere_in_what_the_calls_produced(
    pods: tuple[Component, Component], shop: SqlServer
) -> None:
    tool_pod, aer = pods
    produced: list[str] = []
    for step, (tool, arguments) in enumerate(
        [
            ("postgres.query", {"sql": "SELECT * FROM no_such_table"}),
            ("postgres.execute", {"sql": "UPDATE tp_items SET name = name WHERE id = 2"}),
            ("github.get_issue", {"owner": "acme", "repo": "widgets", "issue_number": 1}),
            ("slack.post_message", {"channel": "C404", "text": "x"}),
        ],
        start=10,
    ):
        produced.append(json.dumps(execute(tool_pod, tool, arguments, step)))
    for pod in (tool_pod, aer):
        with pod.client() as client:
            produced += [client.get("/tools").text, client.get("/metrics").text]
        produced.append(pod.process.output())
    text = "\n".join(produced)
    assert "[redacted]" in text.lower() or "Bad credentials" in text  # the echoed token was seen and removed
    for canary in (*secret_env(shop).values(), *sp.CANARIES):
        assert canary not in text


def test_tool_pod_refuses_to_start_without_a_builtin_credential(
    tmp_path: Path, shop: SqlServer, saas: SaasPeer, spawn: Callable[..., Process]
) -> None:
    index = bundle(tmp_path, shop=shop, saas=saas)
    env = {**operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=index), **secret_env(shop)}
    del env["SLACK_TOKEN"]
    with pytest.raises(RuntimeError) as caught:
        launch(spawn, env, timeout=15)
    assert "reads its token from env SLACK_TOKEN, which is not set" in str(caught.value)
    assert shop.password not in str(caught.value)


def test_agent_yaml_builtin_entries_build_the_same_bundle(
    tmp_path: Path, shop: SqlServer, saas: SaasPeer
) -> None:
    from agent_runtime.connectors import bundle_from_agent_config

    config = tmp_path / "agent.yaml"
    config.write_text(
        json.dumps(
            {
                "version": 1,
                "connectors": [
                    {
                        "name": "shop-db",
                        "type": "postgres",
                        "config": {
                            "host": shop.host,
                            "port": shop.port,
                            "database": "shop",
                            "user": shop.user,
                        },
                        "credentials": {"password": "SHOP_DB_PASSWORD"},
                    }
                ],
            }
        )
    )
    built = bundle_from_agent_config(config)
    assert [b.name for b in built.builtins] == ["shop-db"] and built.tool_count == 2
    again = build_bundle(
        [],
        [
            materialize_builtin(
                name="shop-db",
                type_name="postgres",
                config={"host": shop.host, "port": shop.port, "database": "shop", "user": shop.user},
                credentials={"password": "SHOP_DB_PASSWORD"},
            )
        ],
    )
    assert again.digest == built.digest
