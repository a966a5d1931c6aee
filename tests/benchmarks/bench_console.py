"""The console (issue 30) over a large store: the first inbox page and the executions list, and a 1,000-step
timeline in the browser.

The OE (a real process, SQLite) serves a store written directly through the store API: 100,000 executions
of which 10,000 wait for a review (held calls), and one execution of 1,000 steps (2,000 step events). Each
figure is a median with its baseline from the same run:
- server time of `GET /console/data/inbox` (first page, 50 held calls) and `GET /console/api/executions`
  (first page, 50) against the console's stylesheet on the same OE, and against the client API's own
  `GET /executions` with a bearer token (the console's gateway costs that difference);
- the timeline of the 1,000-step execution, from the navigation's start until the page shows its final
  event (the page's own clock), in Debian's Chromium (Playwright), against a 10-step one.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from agent_runtime.oe.store import open_store
from agent_runtime.oe.store.base import ExecutionRecord, Identity
from agent_runtime.protocol import ExecutionState
from tests.conftest import REPO_ROOT, free_port

CLIENT_TOKEN = "bench-console-client-token"
AGENT = "bench/agent"
EXECUTIONS = 100_000
HELD = 10_000
TIMELINE_STEPS = 1_000
SMALL_STEPS = 10
SAMPLES = 30
BROWSER_RUNS = 5
CHROMIUM = "/usr/bin/chromium"


def _record(index: int, *, now: float, status: ExecutionState) -> ExecutionRecord:
    suspension = None
    if status is ExecutionState.SUSPENDED:
        suspension = {
            "kind": "approval_required",
            "step": 2,
            "tool": "transfer",
            "args": {"amount": index, "to": f"acct-{index}"},
            "reason": "tool 'transfer' is sensitive and needs a reviewer's approval",
        }
    return ExecutionRecord(
        execution_id=uuid.uuid4().hex,
        agent=AGENT,
        project_id="bench",
        workspace_id="bench.agent",
        session_id=f"s-{index}",
        user_id=f"user-{index % 97}",
        input={"mode": "calls", "n": index},
        status=status,
        created_at=now - EXECUTIONS + index,
        updated_at=now - EXECUTIONS + index,
        finished_at=None if status is ExecutionState.SUSPENDED else now - EXECUTIONS + index + 1,
        step_count=2,
        runs=1,
        suspension=suspension,
        invoked_by=Identity(username=f"user-{index % 97}"),
    )


async def _fill(path: Path) -> tuple[str, str]:
    """The store: 100,000 executions (every tenth held), a 1,000-step one and a 10-step one."""
    store = open_store(store_type="sqlite", sqlite_path=str(path), mongodb_uri=None, mongodb_database="x")
    await store.open()
    now = time.time()
    batch = 2_000
    for start in range(0, EXECUTIONS, batch):
        await asyncio.gather(
            *(
                store.create_execution(
                    _record(
                        i,
                        now=now,
                        status=ExecutionState.SUSPENDED
                        if i % (EXECUTIONS // HELD) == 0
                        else ExecutionState.COMPLETED,
                    )
                )
                for i in range(start, start + batch)
            )
        )
    ids = []
    for steps in (TIMELINE_STEPS, SMALL_STEPS):
        record = _record(EXECUTIONS + steps, now=now + steps, status=ExecutionState.COMPLETED)
        record = record.model_copy(update={"step_count": steps, "result": {"steps": steps}})
        await store.create_execution(record)
        at = now
        await store.append_event(record.execution_id, type="created", step=None, data={"agent": AGENT}, at=at)
        await store.append_event(record.execution_id, type="running", step=None, data={}, at=at)
        for step in range(1, steps + 1):
            data = {"tool": "shout", "route": "tool_pod"}
            await store.append_event(record.execution_id, type="step_started", step=step, data=data, at=at)
            at += 0.004
            done = {"tool": "shout", "status": "success", "from_cache": False}
            await store.append_event(record.execution_id, type="step_finished", step=step, data=done, at=at)
        await store.append_event(record.execution_id, type="completed", step=None, data={}, at=at)
        ids.append(record.execution_id)
    await store.close()
    return ids[0], ids[1]


def _medians_ms(requests: dict[str, tuple[httpx.Client, str]]) -> dict[str, float]:
    """Each request's median time; the requests take turns, so a busy moment of the machine or of the OE
    (just started, its background loops) lands on all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in requests}
    for client, path in requests.values():
        client.get(path)  # warm
    for _ in range(SAMPLES):
        for name, (client, path) in requests.items():
            began = time.perf_counter()
            response = client.get(path)
            samples[name].append(time.perf_counter() - began)
            if response.status_code != 200:
                raise RuntimeError(f"{path}: HTTP {response.status_code} {response.text[:200]}")
    return {name: statistics.median(taken) * 1000 for name, taken in samples.items()}


def _sign_in(base: str) -> httpx.Client:
    """A client holding a console session (its cookies sent by hand: httpx sends no Secure cookie over
    plain http, which browsers do on loopback)."""
    with httpx.Client(base_url=base, timeout=30) as anonymous:
        login = anonymous.get("/console/sign-in").cookies.get("ae_console_login") or ""
        answer = anonymous.post(
            "/console/sign-in",
            json={"token": CLIENT_TOKEN, "login_csrf": login},
            headers={"origin": base, "cookie": f"ae_console_login={login}"},
        )
    if answer.status_code != 200:
        raise RuntimeError(f"sign-in: HTTP {answer.status_code} {answer.text}")
    session = answer.cookies.get("ae_console") or ""
    return httpx.Client(base_url=base, timeout=30, headers={"cookie": f"ae_console={session}"})


def _timeline_ms(base: str, execution_ids: tuple[str, str]) -> tuple[float, float]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(base_url=base)
        page = context.new_page()
        page.goto("/console/sign-in")
        page.fill("#token", CLIENT_TOKEN)
        page.click("button[type=submit]")
        page.wait_for_url("**/console/inbox")
        medians = []
        for execution_id in execution_ids:
            samples = []
            for _ in range(BROWSER_RUNS + 1):
                page.goto(f"/console/executions/{execution_id}")
                page.wait_for_selector("#app[data-final=true]", timeout=60_000, state="attached")
                # In the page's own clock: from the navigation's start to the final event on screen.
                samples.append(float(page.get_attribute("#app", "data-final-at") or "nan") / 1000)
                rows = page.locator("#timeline li.step").count()
                if rows != (TIMELINE_STEPS if execution_id == execution_ids[0] else SMALL_STEPS):
                    raise RuntimeError(f"the timeline shows {rows} steps")
            medians.append(statistics.median(samples[1:]) * 1000)
        browser.close()
    return medians[0], medians[1]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp_dir:
        tmp = Path(tmp_dir)
        began = time.perf_counter()
        big, small = asyncio.run(_fill(tmp / "oe.sqlite3"))
        print(
            f"store written: {EXECUTIONS:,} executions ({HELD:,} held) in {time.perf_counter() - began:.1f}s"
        )
        regs = tmp / "registrations"
        regs.mkdir()
        # The Agent's runtimes are not running: the console reads the store, and nothing here is resumed.
        (regs / "bench.json").write_text(
            json.dumps(
                {
                    "agent": AGENT,
                    "token": "bench-console-runtime-token",
                    "aerUrl": "http://127.0.0.1:9",
                    "toolUrl": "http://127.0.0.1:9",
                    "tools": [{"name": "transfer", "location": "remote", "sensitive": True}],
                }
            )
        )
        port = free_port()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp),
            "PYTHONPATH": str(REPO_ROOT),
            "RUNNER_MODE": "oe",
            "APP_HOST": "127.0.0.1",
            "RUNTIME_PORT": str(port),
            "OE_SQLITE_PATH": str(tmp / "oe.sqlite3"),
            "OE_REGISTRATIONS_DIR": str(regs),
            "OE_CLIENT_TOKEN": CLIENT_TOKEN,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_runtime.launcher"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(base + "/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the OE did not become ready")
                time.sleep(0.1)
            with (
                _sign_in(base) as console,
                httpx.Client(base_url=base, headers={"authorization": f"Bearer {CLIENT_TOKEN}"}) as api,
            ):
                time.sleep(2.0)  # the OE's start-up work (recovery, first registration read) settles
                figures = _medians_ms(
                    {
                        "baseline": (console, "/console/static/console.css"),
                        "inbox": (console, "/console/data/inbox"),
                        "listed": (console, "/console/api/executions"),
                        "direct": (api, "/executions"),
                    }
                )
                health, inbox, listed, direct = (
                    figures[k] for k in ("baseline", "inbox", "listed", "direct")
                )
                held_page = console.get("/console/data/inbox").json()["items"]
                if len(held_page) != 50:
                    raise RuntimeError(f"the inbox's first page holds {len(held_page)} calls")
            print(f"baseline GET /console/static/console.css: {health:.2f} ms (median of {SAMPLES})")
            print(f"console inbox, first page of {HELD:,} held calls: {inbox:.2f} ms ({inbox / health:.1f}x)")
            print(
                f"console executions list, first page of {EXECUTIONS:,}: {listed:.2f} ms "
                f"({listed / health:.1f}x)"
            )
            print(
                f"client API GET /executions, same page: {direct:.2f} ms (gateway {listed - direct:+.2f} ms)"
            )
            if Path(CHROMIUM).exists():
                long_ms, short_ms = _timeline_ms(base, (big, small))
                print(
                    f"timeline of {SMALL_STEPS} steps in Chromium: {short_ms:.1f} ms "
                    f"(median of {BROWSER_RUNS})"
                )
                print(
                    f"timeline of {TIMELINE_STEPS:,} steps in Chromium: {long_ms:.1f} ms "
                    f"({long_ms / short_ms:.1f}x the {SMALL_STEPS}-step one)"
                )
            else:
                print(f"timeline: no {CHROMIUM} (make browser)")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
