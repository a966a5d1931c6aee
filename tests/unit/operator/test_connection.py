"""The Connected condition's decisions (issue 36): which Agent tests, when, and what the OE's answer says."""

from __future__ import annotations

from typing import Any

import pytest

from agent_operator.connection import (
    CONNECTED,
    ConnectionSettings,
    LastTest,
    connected_event,
    due,
    from_answer,
    not_configured,
    pick_agent,
    reason_of,
    token_unreadable,
    unreachable,
    with_connected,
)
from agent_operator.status import Condition

SETTINGS = ConnectionSettings(token_file="/t", period_seconds=600, retry_seconds=30)


def _agent(connectors: list[str], *, ready: bool, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {}
    return {
        "metadata": meta,
        "spec": {"connectors": connectors},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_the_first_ready_agent_by_name_that_lists_the_connector_tests_it() -> None:
    agents = {
        ("team", "zed"): _agent(["crm"], ready=True),
        ("team", "amy"): _agent(["crm"], ready=False),
        ("team", "bob"): _agent(["crm", "db"], ready=True),
        ("team", "gone"): _agent(["crm"], ready=True, deleting=True),
        ("other", "aaa"): _agent(["crm"], ready=True),
        ("team", "aab"): _agent(["db"], ready=True),
    }
    assert pick_agent("team", "crm", agents) == "bob"


def test_no_user_and_no_ready_user_are_unknown_with_their_own_reason() -> None:
    none = pick_agent("team", "crm", {("team", "a"): _agent(["db"], ready=True)})
    assert isinstance(none, Condition) and (none.status, none.reason) == ("Unknown", "NoAgentUsesIt")
    waiting = pick_agent("team", "crm", {("team", "a"): _agent(["crm"], ready=False)})
    assert isinstance(waiting, Condition) and (waiting.status, waiting.reason) == ("Unknown", "NoReadyAgent")
    assert "a" in waiting.message


def test_a_test_is_due_when_new_changed_asked_or_old() -> None:
    last = LastTest(generation=3, at=100.0, status="True")
    assert due(None, generation=3, now=100.0, settings=SETTINGS)
    assert due(last, generation=4, now=101.0, settings=SETTINGS)
    assert due(last, generation=3, now=101.0, settings=SETTINGS, asked=True)
    assert not due(last, generation=3, now=699.0, settings=SETTINGS)
    assert due(last, generation=3, now=700.0, settings=SETTINGS)
    unknown = LastTest(generation=3, at=100.0, status="Unknown")
    assert not due(unknown, generation=3, now=129.0, settings=SETTINGS)
    assert due(unknown, generation=3, now=130.0, settings=SETTINGS)
    never = ConnectionSettings(token_file="/t", period_seconds=0, retry_seconds=30)
    assert not due(last, generation=3, now=10_000.0, settings=never)


@pytest.mark.parametrize(
    ("detail", "reason"),
    [
        ("auth: HTTP 401: the provider refused the credential", "Unauthorized"),
        ("forbidden: HTTP 403: no", "Forbidden"),
        ("connection: the provider could not be reached", "Unreachable"),
        ("timeout: no answer within 10 s", "Unreachable"),
        ("privileges: user 'agent' can write", "Privileges"),
        ("credential_missing: connector 'x' needs its token", "CredentialMissing"),
        ("rate_limited: HTTP 429", "RateLimited"),
        ("server_error: HTTP 500", "ProviderError"),
        ("something else went wrong", "TestFailed"),
        ("weird: category", "TestFailed"),
    ],
)
def test_a_failed_tests_reason_is_its_category(detail: str, reason: str) -> None:
    assert reason_of(detail) == reason


def test_the_answer_makes_the_condition() -> None:
    ok = from_answer(agent="bot", status=200, body={"ok": True, "detail": "the base URL answered HTTP 200"})
    assert (ok.type, ok.status, ok.reason) == (CONNECTED, "True", "Connected")
    assert "HTTP 200" in ok.message and "Agent bot" in ok.message
    bad = from_answer(agent="bot", status=200, body={"ok": False, "detail": "auth: HTTP 401: refused"})
    assert (bad.status, bad.reason) == ("False", "Unauthorized")
    cases = {
        (401, "x"): "OperatorUnauthorized",
        (403, "x"): "OperatorForbidden",
        (404, "connector_not_found"): "ConnectorNotInBundle",
        (404, "agent_not_found"): "AgentNotRegistered",
        (502, "tool_pod_unreachable"): "ToolPodUnreachable",
        (500, "boom"): "TestNotRun",
    }
    for (status, error), reason in cases.items():
        found = from_answer(agent="bot", status=status, body={"error": error, "detail": "d"})
        assert (found.status, found.reason) == ("Unknown", reason), (status, error)
    assert "agents/invoke" in from_answer(agent="bot", status=403, body=None).message


def test_messages_are_one_bounded_line_without_url_credentials() -> None:
    found = from_answer(
        agent="bot", status=200, body={"ok": False, "detail": "connection: https://u:pw@h/x\n" + "y" * 900}
    )
    assert "\n" not in found.message and "u:pw" not in found.message and len(found.message) <= 500
    assert "user:secret" not in unreachable("http://user:secret@oe:8080", "ConnectError").message
    assert not_configured().reason == "NotConfigured"
    unreadable = token_unreadable("/var/run/t", "FileNotFoundError")
    assert (unreadable.status, unreadable.reason) == ("Unknown", "TokenUnreadable")
    assert "AGENT_OPERATOR_OE_TOKEN_FILE" in unreadable.message


def test_the_condition_is_kept_when_not_tested_and_merged_when_tested() -> None:
    previous = {
        "conditions": [
            {"type": "Ready", "status": "True"},
            {
                "type": CONNECTED,
                "status": "True",
                "reason": "Connected",
                "message": "m",
                "observedGeneration": 1,
                "lastTransitionTime": "T0",
            },
        ]
    }
    status = {"conditions": [{"type": "Ready", "status": "True"}]}
    kept = with_connected(status, previous=previous, connected=None, generation=2, now="T1")
    assert kept["conditions"][1]["lastTransitionTime"] == "T0"
    same = Condition(CONNECTED, "True", "Connected", "m2")
    merged = with_connected(status, previous=previous, connected=same, generation=2, now="T1")
    assert (
        merged["conditions"][1]["lastTransitionTime"] == "T0" and merged["conditions"][1]["message"] == "m2"
    )
    failed = Condition(CONNECTED, "False", "Unauthorized", "auth")
    changed = with_connected(status, previous=previous, connected=failed, generation=2, now="T1")
    assert changed["conditions"][1]["lastTransitionTime"] == "T1"


def test_an_event_only_when_status_or_reason_changes() -> None:
    previous = {"conditions": [{"type": CONNECTED, "status": "True", "reason": "Connected", "message": "a"}]}
    assert connected_event(previous, Condition(CONNECTED, "True", "Connected", "b")) is None
    assert connected_event(previous, Condition(CONNECTED, "False", "Unauthorized", "x")) == (
        "Unauthorized",
        "x",
        "Warning",
    )
    assert connected_event({}, Condition(CONNECTED, "True", "Connected", "ok"))[2] == "Normal"  # type: ignore[index]
    assert connected_event({}, Condition(CONNECTED, "Unknown", "NoAgentUsesIt", "n"))[2] == "Normal"  # type: ignore[index]


def test_settings_name_the_variable_they_refuse() -> None:
    assert ConnectionSettings.from_env({}).token_file == ""
    parsed = ConnectionSettings.from_env(
        {"AGENT_OPERATOR_OE_TOKEN_FILE": "/t", "AGENT_OPERATOR_CONNECTION_TEST_SECONDS": "60"}
    )
    assert (parsed.token_file, parsed.period_seconds) == ("/t", 60.0)
    with pytest.raises(ValueError, match="AGENT_OPERATOR_CONNECTION_RETRY_SECONDS"):
        ConnectionSettings.from_env({"AGENT_OPERATOR_CONNECTION_RETRY_SECONDS": "soon"})
    with pytest.raises(ValueError, match="AGENT_OPERATOR_CONNECTION_TEST_SECONDS"):
        ConnectionSettings.from_env({"AGENT_OPERATOR_CONNECTION_TEST_SECONDS": "-1"})
