"""agentRef over two OE replicas on one PostgreSQL (issue 38): the parent and its held child were started on
one replica, which is SIGKILLed; the child's hold is decided on the other replica meanwhile; the first,
started again (nothing of them in its memory), hears the child end and lifts the parent's hold; the parent
goes on with the child's answer, its held transfer run once.

The AER and the Tool Pod talk to the first replica's address (their OE URL), as a Service's would to
whichever pod answers; the second is another process on the same database.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.execution_token import SIGNING_KEY_FILE_ENV
from tests.conftest import REPO_ROOT, Process, free_port
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, Platform
from tests.integration.postgres import RunningPostgres
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

pytestmark = pytest.mark.integration


def replica_env(dsn: str) -> dict[str, str]:
    return {"OE_STORE_TYPE": "postgres", "OE_POSTGRES_URL": dsn, "OE_REPLICAS": "2"}


@pytest.fixture
def stack(
    tmp_path: Path, spawn: Callable[..., Process], oe_postgres: RunningPostgres
) -> Iterator[tuple[Platform, str]]:
    """The platform with its first OE replica on a fresh PostgreSQL database, and that database's DSN."""
    dsn = oe_postgres.new_database()
    with running_llm_peer() as llm, running_echo_provider() as provider:
        platform = Platform(
            tmp=tmp_path,
            spawn=spawn,
            llm_base_url=llm.base_url,
            provider_url=provider.url,
            registration={"agentRefs": [{"tool": "agent.loop", "agent": AGENT}]},
        )
        platform.start_tool_pod()
        platform.start_aer()
        platform.write_registrations()
        platform.start_oe(extra=replica_env(dsn))
        yield platform, dsn


def second_replica(platform: Platform, dsn: str) -> str:
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(platform.tmp),
        "PYTHONPATH": str(REPO_ROOT),
        "RUNNER_MODE": "oe",
        "APP_HOST": "127.0.0.1",
        "RUNTIME_PORT": str(port),
        "STRUCTURED_LOGGING": "true",
        "OE_REGISTRATIONS_DIR": str(platform.tmp / "registrations"),
        "OE_CLIENT_TOKEN": CLIENT_TOKEN,
        "OE_WATCHDOG_INTERVAL_S": "0.5",
        "OE_AER_LOST_AFTER_S": "2",
        SIGNING_KEY_FILE_ENV: str(platform.key_files()[0]),
        **replica_env(dsn),
    }
    platform.processes["oe-2"] = platform._launch(env, port=port)
    return f"http://127.0.0.1:{port}"


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def test_the_childs_hold_decided_on_another_replica_while_the_parents_oe_was_down(
    stack: tuple[Platform, str],
) -> None:
    platform, dsn = stack
    other = second_replica(platform, dsn)
    held = calls(("transfer", {"amount": 9, "to": "rep"}))
    parent = platform.invoke(calls(("agent.loop", {"input": held}), ("shout", {"text": "after"})))
    hold = platform.wait(parent, "suspended")["suspension"]
    child = hold["payload"]["child_execution_id"]

    oe = platform.processes["oe"].popen
    oe.send_signal(signal.SIGKILL)
    oe.wait(10)
    headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    with httpx.Client(base_url=other, headers=headers, timeout=30) as replica:
        route = f"/api/v1/projects/team-a/executions/{child}/resume"
        decided = replica.post(route, json={"decision": "approved"})
        assert decided.status_code == 202, decided.text
    # The child's run starts from the other replica and calls the dead one until it is back.
    platform.start_oe(extra=replica_env(dsn))

    done = platform.wait(parent, "completed", "failed", timeout=60)
    assert done["status"] == "completed", (done, platform.outputs())
    transferred, after = done["result"]["results"]
    assert transferred["results"][0]["ok"] is True and after == {"loud": "AFTER"}
    assert platform.ledger.read_text().splitlines() == ["9 rep"]
    (review,) = done["reviews"]
    assert review["decided_by"]["username"] == "agent-engine:child-execution"
    with httpx.Client(base_url=other, headers=headers, timeout=30) as replica:
        seen = replica.get(f"/execution/{parent}").json()
    assert seen["status"] == "completed"  # the other replica reads the same store
