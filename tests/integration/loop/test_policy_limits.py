"""Issue 34 end to end, with the real OE, AER and Tool Pod (and a second OE replica on the same store):
CEL conditions on arguments, limits, approval deadlines with notifications, the tamper-evident audit."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_operator.models import Agent, Connector
from agent_operator.notify_targets import notify_document, notify_targets
from agent_runtime.oe.audit_export import EXPORT_FILE_ENV, OTLP_ENDPOINT_ENV, OTLP_HEADERS_ENV
from agent_runtime.oe.limiter import DEFAULT_LIMITS_ENV
from agent_runtime.oe.usage import PRICES_ENV
from tests.conftest import REPO_ROOT, free_port
from tests.integration.loop.harness import (
    AGENT,
    CLIENT_TOKEN,
    PLANTED,
    RUNTIME_TOKEN,
    Platform,
    platform_on_peers,
)
from tests.peers.otlp_logs_receiver import LogsReceiver, running_logs_receiver
from tests.providers.notify_receiver import Receiver, running_receiver

pytestmark = pytest.mark.integration

SIGNING_SECRET = "whsec-notify-5e1f0a"
SLACK_TOKEN = "xoxb-notify-77c1d2"
OTLP_API_KEY = "otlp-key-3b9e57"
SYSTEM = "system:agent-engine:approval-timeout"
POLICY = {
    "sensitive": "allow",
    "requireApproval": [
        # A transfer a reviewer decides (a deadline long enough for the test to decide first).
        {"tool": "transfer", "when": "args.to == 'reviewed'", "approval": {"timeout": "10m"}},
        {
            "tool": "transfer",
            "when": "args.amount > 10000",
            "approval": {"timeout": "2s", "onTimeout": "reject"},
        },
    ],
    "deny": [
        # Errors at run time for text "boom" (no such argument): fails closed.
        {"tool": "shout", "when": "args.text == 'boom' && args.missing > 1"},
        # Builds a string of copies of a caller's string per item: stopped by the cost limit too.
        {"tool": "shout", "when": "has(args.s) && args.items.map(a, args.s + args.s + args.s).size() > 0"},
        # Comprehensions three deep over a caller's list: stopped by the cost limit before it runs.
        {
            "tool": "shout",
            "when": "has(args.items) && "
            "args.items.map(a, args.items.map(b, args.items.map(c, a + b + c))).size() > 0",
        },
    ],
}
# The price table (the chart's pricing, per million tokens): what a model call costs.
PRICES = {"currency": "USD", "models": {"loop-model": {"input": 2.0, "output": 8.0, "cached": 0.5}}}
# The chart's namespace-wide defaults (oe.limits -> OE_DEFAULT_LIMITS): the Agent sets no
# maxStepsPerExecution, so the default's 8 holds for it; its own toolCallsPerMinuteByTool wins over the
# default's.
DEFAULT_LIMITS = {"maxStepsPerExecution": 8, "toolCallsPerMinuteByTool": {"key_of_call": 1000}}
LIMITS = {
    # A cent's thousandth a day per user, in the price table's currency: one model call spends more.
    "maxCostPerUserPerDay": 0.00001,
    "toolCallsPerMinuteByTool": {"key_of_call": 5},
    "maxConcurrentExecutionsPerUser": 1,  # pending or running; a suspended one waits for a human, not a slot
}


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with running_receiver(secret=SIGNING_SECRET, slack_token=SLACK_TOKEN) as running:
        yield running


@pytest.fixture(scope="module")
def logs_receiver() -> Iterator[LogsReceiver]:
    # Its first two requests are refused (503): the export retries them, in order.
    with running_logs_receiver(api_key=OTLP_API_KEY, fail_first=2) as running:
        yield running


def agent_notify(receiver: Receiver) -> list[dict[str, Any]]:
    """The registration's notify targets as the operator renders them from an Agent's spec.notify (its
    webhook's signingSecretRef and its slack Connector's token credential read from their Secrets)."""
    agent = Agent.from_body(
        {
            "metadata": {"name": "loop", "namespace": "team-a"},
            "spec": {
                "entrypoint": "loop.app:app",
                "notify": [
                    {
                        "type": "webhook",
                        "url": f"{receiver.url}/hook",
                        "signingSecretRef": {"name": "review-hook", "key": "hmac"},
                    },
                    {"type": "slack", "connector": "team-slack", "channel": "#reviews"},
                ],
            },
        }
    )
    slack = Connector.from_body(
        {
            "metadata": {"name": "team-slack", "namespace": "team-a"},
            "spec": {
                "source": {"type": "slack"},
                "config": {"base_url": f"{receiver.url}/api"},
                "credentials": [
                    {
                        "field": "token",
                        "env": "SLACK_TOKEN",
                        "secretKeyRef": {"name": "slack-bot", "key": "t"},
                    }
                ],
            },
        }
    )
    values = {("review-hook", "hmac"): SIGNING_SECRET, ("slack-bot", "t"): SLACK_TOKEN}
    return notify_document(notify_targets(agent, {"team-slack": slack}, values))


@pytest.fixture(scope="module")
def platform(
    module_spawn: Any,
    tmp_path_factory: pytest.TempPathFactory,
    receiver: Receiver,
    logs_receiver: LogsReceiver,
) -> Iterator[Platform]:
    with platform_on_peers(
        tmp=tmp_path_factory.mktemp("policy"),
        spawn=module_spawn,
        policy=POLICY,
        registration={"limits": LIMITS, "notify": agent_notify(receiver)},
    ) as loop:
        loop.start_tool_pod()
        loop.start_aer()
        loop.write_registrations()
        loop.start_oe(
            extra={
                # The audit export stream: a JSONL file and an OTLP logs endpoint (with an API key).
                EXPORT_FILE_ENV: str(loop.tmp / "export" / "audit.jsonl"),
                OTLP_ENDPOINT_ENV: logs_receiver.endpoint,
                OTLP_HEADERS_ENV: f"x-api-key={OTLP_API_KEY}",
                DEFAULT_LIMITS_ENV: json.dumps(DEFAULT_LIMITS),
                # The price table (the chart's pricing): a model call's cost, which the day's budget counts.
                PRICES_ENV: json.dumps(PRICES),
            }
        )
        yield loop


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def tool_audit(platform: Platform, execution_id: str) -> list[dict[str, Any]]:
    return [
        r for r in platform.audit(execution_id) if r["kind"] == "tool" and r["decision"] != "callback_result"
    ]


def ledger(platform: Platform) -> list[str]:
    return platform.ledger.read_text().splitlines() if platform.ledger.exists() else []


def verify(platform: Platform, execution_id: str) -> dict[str, Any]:
    with platform.client() as client:
        response = client.get(f"/execution/{execution_id}/audit/verify")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_refund_of_50_runs_one_of_20000_is_held_then_expires_rejected_and_reviewers_are_told(
    platform: Platform, receiver: Receiver
) -> None:
    execution_id = platform.invoke(
        calls(("transfer", {"amount": 50, "to": "a"}), ("transfer", {"amount": 20000, "to": "b"}))
    )
    held = platform.wait(execution_id, "suspended")
    assert held["suspension"]["step"] == 2
    assert "args.amount > 10000" in held["suspension"]["reason"]
    assert ledger(platform) == ["50 a"]  # the small one ran, the large one did not
    # Nobody decides: at the 2 s deadline the OE's watchdog rejects it, as decided by the system.
    view = platform.wait(execution_id, "completed", "failed", timeout=30)
    assert view["status"] == "completed", view
    assert view["reviews"][-1]["decision"] == "rejected"
    assert view["reviews"][-1]["decided_by"]["username"] == SYSTEM
    assert "no reviewer decided within 2s" in view["reviews"][-1]["reviewer_notes"]
    assert view["result"]["results"][1]["error"]
    assert ledger(platform) == ["50 a"]  # rejected: never ran
    # The webhook receiver verified the signature of each (its first request was refused with 503: retried).
    created = receiver.wait_for(
        "webhooks", lambda b: b["event"] == "review.created" and b["execution_id"] == execution_id
    )
    assert created["asks"] == {
        **created["asks"],
        "tool": "transfer",
        "step": 2,
        "args": {"amount": 20000, "to": "b"},
    }
    expired = receiver.wait_for(
        "webhooks", lambda b: b["event"] == "review.expired" and b["execution_id"] == execution_id
    )
    assert (expired["decision"], expired["decided_by"]) == ("rejected", SYSTEM)
    assert receiver.refused == []
    slack = receiver.wait_for(
        "slack", lambda b: execution_id in b["text"] and "waits for a reviewer" in b["text"]
    )
    assert slack["channel"] == "#reviews"
    sent = json.dumps([receiver.webhooks, receiver.slack])
    assert all(secret not in sent for secret in (*PLANTED, SIGNING_SECRET, SLACK_TOKEN))


GATEWAY = "/api/v1/projects/team-a/executions/{execution_id}/resume"


def test_a_decided_review_is_announced_signed_and_a_slow_receiver_never_holds_the_run(
    platform: Platform, receiver: Receiver
) -> None:
    receiver.delay_s = 4.0  # each webhook answered 4 s late
    try:
        execution_id = platform.invoke(calls(("transfer", {"amount": 70, "to": "reviewed"})))
        held = platform.wait(execution_id, "suspended")
        assert "args.to == 'reviewed'" in held["suspension"]["reason"]
        with platform.client() as client:
            inbox = client.get("/api/v1/projects/team-a/reviews").json()["items"]
            decided = client.post(
                GATEWAY.format(execution_id=execution_id),
                json={"decision": "approved", "reviewer_notes": "fine"},
            )
        assert decided.status_code == 202, decided.text
        view = platform.wait(execution_id, "completed", "failed", timeout=30)
        # Done while the receiver still sits on the decision's notification: the run never waited for it.
        assert view["status"] == "completed", view
        assert not [
            b
            for b in receiver.webhooks
            if b["execution_id"] == execution_id and b["event"] == "review.decided"
        ]
    finally:
        receiver.delay_s = 0.0
    assert ledger(platform)[-1] == "70 reviewed"
    announced = receiver.wait_for(
        "webhooks", lambda b: b["event"] == "review.decided" and b["execution_id"] == execution_id, timeout=30
    )
    # What the inbox shows (the review view), with the decision and who made it; the signature was verified.
    assert announced["asks"]["tool"] == "transfer" and announced["asks"]["args"] == {
        "amount": 70,
        "to": "reviewed",
    }
    assert announced["decision"] == "approved" and announced["decided_by"]
    assert announced["resume"] == GATEWAY.format(execution_id=execution_id)
    created = receiver.wait_for(
        "webhooks", lambda b: b["event"] == "review.created" and b["execution_id"] == execution_id
    )
    assert created["asks"] == announced["asks"]
    # The notification is the inbox's entry, with the event and when it was sent.
    shown = next(item for item in inbox if item["execution_id"] == execution_id)
    assert {k: v for k, v in created.items() if k not in ("event", "at")} == shown
    receiver.wait_for("slack", lambda b: execution_id in b["text"] and "was decided (approved)" in b["text"])
    assert receiver.refused == []
    sent = json.dumps([receiver.webhooks, receiver.slack])
    assert all(secret not in sent for secret in (*PLANTED, SIGNING_SECRET, SLACK_TOKEN))


def _export_lines(lines: list[dict[str, Any]], execution_id: str) -> list[dict[str, Any]]:
    return [
        line
        for line in lines
        if line.get("execution_id") == execution_id
        or (line.get("head") or {}).get("execution_id") == execution_id
    ]


def test_the_audit_export_stream_reaches_a_file_and_an_otlp_logs_endpoint_with_the_chain_hashes(
    platform: Platform, logs_receiver: LogsReceiver
) -> None:
    execution_id = platform.invoke(calls(*[("shout", {"text": f"e{n}"}) for n in range(3)]))
    assert platform.wait(execution_id)["status"] == "completed"
    with platform.client() as client:
        stored = client.get(f"/execution/{execution_id}/audit").json()
    records = stored["records"]
    assert len(records) >= 3 and all(r["hash"] for r in records)
    # The collector decoded protobuf log records: one per audit record and one per signed head, each naming
    # its execution, sequence number and chain hash as attributes (its first two requests were refused).
    logs_receiver.wait_for(
        "the last record's log",
        lambda r: (
            r["attributes"].get("audit.hash") == records[-1]["hash"]
            and r["attributes"]["audit.kind"] == "head"
        ),
    )
    exported = logs_receiver.audit(execution_id)
    assert [line for line in exported if "head" not in line] == records
    logged = [r for r in logs_receiver.records if r["attributes"].get("audit.execution_id") == execution_id]
    for log, record in zip(
        [r for r in logged if r["attributes"]["audit.kind"] == "record"], records, strict=True
    ):
        assert log["attributes"]["audit.seq"] == record["seq"]
        assert (log["attributes"]["audit.hash"], log["attributes"].get("audit.prev_hash", "")) == (
            record["hash"],
            record["prev_hash"],
        )
        assert log["resource"]["service.name"] == "agent-engine-oe" and log["scope"] == "agent_engine.audit"
    assert logs_receiver.requests > len(logs_receiver.raw) and logs_receiver.refused == []
    # The JSONL file holds the same lines.
    jsonl = [json.loads(line) for line in (platform.tmp / "export" / "audit.jsonl").read_text().splitlines()]
    assert _export_lines(jsonl, execution_id) == exported
    # The collector's copy verifies offline against the OE's public key; an edit in it is found.
    public_key = platform.key_files()[1]
    copy = platform.tmp / "collector-copy.jsonl"
    copy.write_text("".join(json.dumps(line) + "\n" for line in exported))
    intact = _cli(platform, "audit", "verify", "--file", str(copy), "--public-key", str(public_key))
    assert intact.returncode == 0 and "intact" in intact.stdout, intact.stdout + intact.stderr
    second = [n for n, line in enumerate(exported) if "head" not in line][1]
    exported[second]["args"] = {"text": "changed"}
    copy.write_text("".join(json.dumps(line) + "\n" for line in exported))
    broken = _cli(platform, "audit", "verify", "--file", str(copy), "--public-key", str(public_key))
    assert broken.returncode == 1, broken.stdout
    # The endpoint's API key is in no log of the OE.
    assert OTLP_API_KEY not in platform.outputs()


def test_a_condition_that_errors_or_costs_too_much_denies_and_the_audit_says_why(platform: Platform) -> None:
    execution_id = platform.invoke(
        calls(
            ("shout", {"text": "boom"}),
            ("shout", {"text": "y", "items": list(range(200)), "s": "x" * 200_000}),
            ("shout", {"text": "x", "items": list(range(300))}),
            ("shout", {"text": "ok"}),
        )
    )
    view = platform.wait(execution_id)
    assert view["status"] == "completed", view
    results = view["result"]["results"]
    assert results[3] == {"loud": "OK"}  # the condition holds for none: it runs
    records = tool_audit(platform, execution_id)
    assert [r["decision"] for r in records] == ["deny", "deny", "deny", "allow"]
    assert "deny[0].when" in records[0]["reason"] and "could not be evaluated" in records[0]["reason"]
    assert "no such key" in records[0]["reason"].lower() or "missing" in records[0]["reason"]
    assert "deny[1].when" in records[1]["reason"] and "estimated cost" in records[1]["reason"]
    assert "deny[2].when" in records[2]["reason"] and "estimated cost" in records[2]["reason"]


def test_a_runaway_agent_stops_at_max_steps_per_execution(platform: Platform) -> None:
    # The limit is the chart's default (the Agent's spec.limits has no maxStepsPerExecution).
    execution_id = platform.invoke(calls(*[("shout", {"text": f"again {n}"}) for n in range(12)]))
    view = platform.wait(execution_id, "failed", "completed")
    assert view["status"] == "failed", view
    assert view["error"]["category"] == "budget_exceeded"
    assert "maxStepsPerExecution" in view["error"]["explanation"]
    records = tool_audit(platform, execution_id)
    assert [r["decision"] for r in records[:8]] == ["allow"] * 8
    refused = records[8]
    assert (refused["decision"], refused["error_category"]) == ("refused", "budget_exceeded")
    assert refused["detail"] == {"limit": "maxStepsPerExecution", "value": 8, "figure": 9}


def test_a_users_daily_cost_budget_stops_new_executions_and_says_when_it_resets(platform: Platform) -> None:
    with platform.client() as client:
        first = client.post(
            "/invoke",
            json={
                "agent": AGENT,
                "user_id": "spender",
                "input": {"mode": "llm", "text": "count hello world"},
            },
        )
        assert first.status_code == 202, first.text
        # Its first model call cost more than the day's budget (priced by the table): its next is refused.
        view = platform.wait(first.json()["execution_id"], "failed", "completed")
        assert view["status"] == "failed" and view["error"]["category"] == "budget_exceeded", view
        assert "maxCostPerUserPerDay" in view["error"]["explanation"]
        spent = [
            r["cost"] for r in platform.audit(view["execution_id"]) if r["kind"] == "llm" and r.get("cost")
        ]
        assert spent and spent[0] > 0.00001
        again = client.post(
            "/invoke", json={"agent": AGENT, "user_id": "spender", "input": {"mode": "llm", "text": "hi"}}
        )
        other = client.post(
            "/invoke", json={"agent": AGENT, "user_id": "saver", "input": calls(("shout", {"text": "x"}))}
        )
    assert again.status_code == 429, again.text
    body = again.json()
    assert body["error"] == "budget_exceeded" and body["limit"] == "maxCostPerUserPerDay"
    assert body["figure"] == pytest.approx(sum(spent)) and body["value"] == 0.00001
    midnight = (int(time.time()) // 86400 + 1) * 86400
    assert body["resets_at"] == midnight
    assert time.strftime("%Y-%m-%dT00:00:00Z", time.gmtime(midnight)) in body["detail"]
    assert 0 < int(again.headers["retry-after"]) <= 86400
    assert other.status_code == 202  # another user's budget is their own


def test_a_users_second_execution_at_once_is_a_429_with_retry_after(platform: Platform) -> None:
    gate = platform.tmp / "busy-gate"
    task = {"agent": AGENT, "user_id": "busy", "input": calls(("wait_for_file", {"path": str(gate)}))}
    with platform.client() as client:
        first = client.post("/invoke", json=task)
        assert first.status_code == 202, first.text
        platform.wait(first.json()["execution_id"], "running")
        again = client.post("/invoke", json=task)
        other = client.post(
            "/invoke", json={**task, "user_id": "idle", "input": calls(("shout", {"text": "x"}))}
        )
        gate.write_text("go")
        platform.wait(first.json()["execution_id"], "completed", "failed")
        after = client.post("/invoke", json={**task, "input": calls(("shout", {"text": "y"}))})
    assert again.status_code == 429, again.text
    body = again.json()
    # The figure is what it would be with this one: two at once, where one is allowed.
    assert (body["error"], body["limit"], body["value"], body["figure"]) == (
        "rate_limited",
        "maxConcurrentExecutionsPerUser",
        1,
        2,
    )
    assert "wait for one to finish" in body["detail"]
    # No execution holds it, so the OE's log keeps the refusal, with the limit and the figure.
    logged = (
        "invoke of team-a/loop refused (user busy): spec.limits.maxConcurrentExecutionsPerUser is 1, figure 2"
    )
    assert logged in platform.outputs()
    assert int(again.headers["retry-after"]) >= 1
    assert other.status_code == 202  # another user's executions are their own
    assert after.status_code == 202, after.text  # the slot is free once the first ended
    platform.wait(after.json()["execution_id"])


def test_tool_calls_per_minute_holds_across_two_oe_replicas_sharing_a_store(platform: Platform) -> None:
    gate = platform.tmp / "rate-gate"
    execution_id = platform.invoke(calls(("wait_for_file", {"path": str(gate)})))
    platform.wait(execution_id, "running")
    first_port = platform.oe_port
    first = platform.processes["oe"]
    platform.oe_port = free_port()
    try:
        platform.start_oe()  # a second replica on the same SQLite file
        second_url = platform.oe_url
        platform.processes["oe2"] = platform.processes["oe"]
    finally:
        platform.processes["oe"] = first
        platform.oe_port = first_port
    urls = [platform.oe_url, second_url]
    answers = []
    began = time.time()
    with httpx.Client(headers={"authorization": f"Bearer {RUNTIME_TOKEN}"}, timeout=30) as client:
        for n in range(9):  # the runtime's calls alternate between the replicas
            response = client.post(
                f"{urls[n % 2]}/tool/execute",
                json={"execution_id": execution_id, "step": 50 + n, "tool": "key_of_call", "args": {}},
            )
            answers.append((response.status_code, response.json()))
    ended = time.time()
    gate.write_text("go")
    # 5 a minute is one slot per 12 s: a bucket of 5 that gets one more at each 12 s boundary crossed.
    refills = int(ended // 12) - int(began // 12)
    allowed = [a for a in answers if a[0] == 200 and a[1].get("proceed")]
    refused = [a for a in answers if a[0] == 200 and a[1].get("proceed") is False]
    assert 5 <= len(allowed) <= 5 + refills, answers  # two replicas of one bucket, never 5 each
    assert len(refused) == 1, answers
    assert answers.index(refused[0]) == len(allowed)  # the first refusal ends it
    assert "toolCallsPerMinuteByTool[key_of_call]" in refused[0][1]["reason"]
    assert all(status == 409 for status, _ in answers[len(allowed) + 1 :])  # the execution failed
    view = platform.wait(execution_id, "failed", "completed")
    assert view["error"]["category"] == "rate_limited"
    record = next(r for r in tool_audit(platform, execution_id) if r["decision"] == "refused")
    assert record["detail"]["limit"] == "toolCallsPerMinuteByTool[key_of_call]"
    assert record["detail"]["value"] == 5


def _cli(platform: Platform, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENTENGINE_SERVER": platform.oe_url,
        "AGENTENGINE_TOKEN": CLIENT_TOKEN,
        "HOME": str(platform.tmp),
    }
    return subprocess.run(
        [sys.executable, "-m", "agent_runtime.cli", *args],
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_editing_or_deleting_an_audit_row_in_the_store_is_reported_at_that_record(platform: Platform) -> None:
    ids = [platform.invoke(calls(*[("shout", {"text": f"t{n}"}) for n in range(3)])) for _ in range(3)]
    for execution_id in ids:
        platform.wait(execution_id)
        verdict = verify(platform, execution_id)
        assert verdict["intact"] is True and verdict["head_signed"] is True, json.dumps(verdict)
    edited, middle, last = ids
    # Offline, from a saved copy: the CLI needs only the OE's public key.
    saved = platform.tmp / "audit.json"
    with platform.client() as client:
        saved.write_text(client.get(f"/execution/{edited}/audit").text)
    public_key = platform.key_files()[1]
    offline = _cli(platform, "audit", "verify", "--file", str(saved), "--public-key", str(public_key))
    assert offline.returncode == 0, offline.stderr
    assert "intact" in offline.stdout
    with sqlite3.connect(platform.tmp / "oe" / "oe.sqlite3") as db:  # someone who can write the store
        db.execute(
            "UPDATE audit SET record = json_set(record, '$.decision', 'deny') "
            "WHERE execution_id = ? AND json_extract(record, '$.seq') = 3",
            (edited,),
        )
        db.execute(
            "DELETE FROM audit WHERE execution_id = ? AND json_extract(record, '$.seq') = 2", (middle,)
        )
        top = db.execute(
            "SELECT max(json_extract(record, '$.seq')) FROM audit WHERE execution_id = ?", (last,)
        ).fetchone()[0]
        db.execute(
            "DELETE FROM audit WHERE execution_id = ? AND json_extract(record, '$.seq') = ?", (last, top)
        )
    assert verify(platform, edited) | {"reason": ""} == {
        "execution_id": edited,
        "intact": False,
        "records": verify(platform, edited)["records"],
        "head_signed": True,
        "broken_at": 3,
        "reason": "",
    }
    assert "edited" in verify(platform, edited)["reason"]
    gone = verify(platform, middle)
    assert (gone["intact"], gone["broken_at"]) == (False, 2) and "removed" in gone["reason"]
    cut = verify(platform, last)
    assert (cut["intact"], cut["broken_at"]) == (False, top) and "removed from the end" in cut["reason"]
    online = _cli(platform, "audit", "verify", middle)
    assert online.returncode == 1
    assert "broken at record 2" in online.stdout + online.stderr
    # The saved copy still verifies (it was taken before the edit): the store's copy no longer matches it.
    assert (
        _cli(platform, "audit", "verify", "--file", str(saved), "--public-key", str(public_key)).returncode
        == 0
    )
    tampered = json.loads(saved.read_text())
    tampered["records"][1]["args"] = {"text": "changed"}
    saved.write_text(json.dumps(tampered))
    offline = _cli(platform, "audit", "verify", "--file", str(saved), "--public-key", str(public_key))
    assert offline.returncode == 1 and "broken at record 2" in offline.stdout + offline.stderr


def test_an_agent_whose_condition_does_not_compile_is_refused_when_the_oe_loads_it(tmp_path: Path) -> None:
    from agent_runtime.oe.registry import RegistrationError, parse_registration

    document = {
        "agent": "team-a/bad",
        "token": "t-secret-1",
        "aerUrl": "http://127.0.0.1:1",
        "toolUrl": "http://127.0.0.1:2",
        "policy": {"requireApproval": ["x", {"tool": "y", "when": "args.amount >"}]},
    }
    with pytest.raises(RegistrationError) as raised:
        parse_registration(json.dumps(document).encode(), source="bad.json")
    assert "requireApproval[1].when" in str(raised.value) and "t-secret-1" not in str(raised.value)
