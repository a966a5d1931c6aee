"""agentRef exactly once across crashes (issue 38): the parent's AER (and then its OE too) SIGKILLed while
the parent's step waits on its child; the resent call attaches to the same child execution, and every side
effect of the child and of the parent lands once in the Tool Pod's ledger.

The child is the loop Agent itself (`agent.loop`): it sends a notification (a side effect the ledger
counts), then waits on a file the test writes only after the crash, so the kill lands mid-child-call.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Process
from tests.integration.loop.harness import AGENT, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

pytestmark = pytest.mark.integration


@pytest.fixture
def platform(tmp_path: Path, spawn: Callable[..., Process]) -> Iterator[Platform]:
    with running_llm_peer() as llm, running_echo_provider() as provider:
        yield Platform(
            tmp=tmp_path,
            spawn=spawn,
            llm_base_url=llm.base_url,
            provider_url=provider.url,
            registration={"agentRefs": [{"tool": "agent.loop", "agent": AGENT}]},
        ).start()


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def children(platform: Platform, parent: str) -> list[str]:
    """Every execution whose record names this parent: read from the OE's own SQLite file."""
    with sqlite3.connect(platform.tmp / "oe" / "oe.sqlite3") as db:
        rows = db.execute(
            "SELECT execution_id FROM executions WHERE json_extract(record, '$.parent.execution_id') = ?",
            (parent,),
        ).fetchall()
    return [str(row[0]) for row in rows]


def start_mid_child_call(platform: Platform, tag: str) -> tuple[str, Path]:
    gate = platform.tmp / f"gate-{tag}"
    child = calls(("send_notification", {"text": f"child-{tag}"}), ("wait_for_file", {"path": str(gate)}))
    parent = platform.invoke(calls(("agent.loop", {"input": child}), ("send_notification", {"text": tag})))
    deadline = time.monotonic() + 30
    while f"notify child-{tag}" not in (platform.ledger.read_text() if platform.ledger.exists() else ""):
        assert time.monotonic() < deadline, platform.outputs()
        time.sleep(0.05)
    return parent, gate


def kill(platform: Platform, name: str) -> None:
    popen = platform.processes[name].popen
    popen.send_signal(signal.SIGKILL)
    popen.wait(10)


def assert_once(platform: Platform, parent: str, tag: str) -> None:
    view = platform.wait(parent, timeout=60)
    assert view["status"] == "completed", view
    (child,) = children(platform, parent)
    assert platform.wait(child)["status"] == "completed"
    lines = platform.ledger.read_text().splitlines()
    assert lines.count(f"notify child-{tag}") == 1 and lines.count(f"notify {tag}") == 1, lines
    answered, sent = view["result"]["results"]
    assert answered["results"][0] == {"sent": f"child-{tag}"} and sent == {"sent": tag}


def test_the_parents_aer_sigkilled_mid_child_call_attaches_to_the_same_child(platform: Platform) -> None:
    parent, gate = start_mid_child_call(platform, "aer")
    kill(platform, "aer")
    platform.start_aer()
    gate.write_text("go")
    assert_once(platform, parent, "aer")
    kinds = [r["kind"] for r in platform.audit(parent)]
    assert "restart" in kinds, kinds  # the parent's run was started again, and its step asked again


def test_the_oe_and_the_aer_sigkilled_mid_child_call_attach_through_the_start_key(
    platform: Platform,
) -> None:
    """No OE remembers the call in flight: the restarted one finds the child by its (parent, step) key."""
    parent, gate = start_mid_child_call(platform, "oe")
    kill(platform, "oe")
    kill(platform, "aer")
    platform.start_aer()
    platform.start_oe()
    gate.write_text("go")
    assert_once(platform, parent, "oe")
