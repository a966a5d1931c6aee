"""onExceed: suspend (issue 34) end to end, with the real OE, AER and Tool Pod: a limit reached mid-run holds
the call as a review of kind `limit` (audited with the limit and the figure); a reviewer who approves raises
the limit for this execution and the held call runs; one who rejects fails it with the limit's category."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.loop.harness import Platform, platform_on_peers

pytestmark = pytest.mark.integration

LIMITS = {"maxStepsPerExecution": 3, "onExceed": "suspend"}
RESUME = "/api/v1/projects/team-a/executions/{execution_id}/resume"


@pytest.fixture(scope="module")
def platform(module_spawn: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    tmp = tmp_path_factory.mktemp("limit-holds")
    with platform_on_peers(tmp=tmp, spawn=module_spawn, registration={"limits": LIMITS}) as loop:
        yield loop.start()


def shouts(count: int) -> dict[str, Any]:
    return {"mode": "calls", "calls": [["shout", {"text": f"again {n}"}] for n in range(count)]}


def decide(platform: Platform, execution_id: str, body: dict[str, Any]) -> dict[str, Any]:
    with platform.client() as client:
        response = client.post(RESUME.format(execution_id=execution_id), json=body)
    assert response.status_code == 202, response.text
    return dict(response.json())


def step_records(platform: Platform, execution_id: str) -> list[dict[str, Any]]:
    return [r for r in platform.audit(execution_id) if r["kind"] == "tool" and r["decision"] != "cached"]


def test_a_limit_reached_holds_the_call_and_an_approval_raises_it_for_this_execution(
    platform: Platform,
) -> None:
    execution_id = platform.invoke(shouts(5))
    held = platform.wait(execution_id, "suspended", "failed", "completed")
    assert held["status"] == "suspended", held
    suspension = held["suspension"]
    assert (suspension["kind"], suspension["step"], suspension["tool"]) == ("limit", 4, "shout")
    assert suspension["payload"] == {
        "limit": "maxStepsPerExecution",
        "value": 3,
        "figure": 4,
        "category": "budget_exceeded",
    }
    assert "maxStepsPerExecution" in suspension["reason"]
    # The hold is audited with the limit and the figure; the held call did not run.
    records = step_records(platform, execution_id)
    assert [r["decision"] for r in records] == ["allow", "allow", "allow", "limit"]
    assert records[-1]["detail"] == {"limit": "maxStepsPerExecution", "value": 3, "figure": 4}
    assert records[-1]["status"] == "suspend"
    # The reviewer's inbox shows it, and a value (the raised limit) may be sent.
    with platform.client() as client:
        inbox = client.get("/api/v1/projects/team-a/reviews").json()
    mine = next(item for item in inbox["items"] if item["execution_id"] == execution_id)
    assert mine["asks"]["kind"] == "limit" and mine["may_send_value"] and not mine["may_edit_args"]

    # Approved without a figure: twice the limit (6) for the rest of this execution; the five calls run.
    decide(platform, execution_id, {"decision": "approved", "reviewer_notes": "let it finish"})
    view = platform.wait(execution_id, "completed", "failed", "suspended")
    assert view["status"] == "completed", view
    assert view["result"]["results"] == [{"loud": f"AGAIN {n}"} for n in range(5)]
    resumed = [r for r in platform.audit(execution_id) if r["kind"] == "resume"]
    assert resumed[-1]["args"]["executed"] == {"limit": "maxStepsPerExecution", "raised_to": 6.0}
    ran = step_records(platform, execution_id)
    assert [r["decision"] for r in ran[4:]] == ["approved", "allow"]


def test_a_raised_limit_holds_again_at_the_raised_figure_and_a_rejection_fails_the_execution(
    platform: Platform,
) -> None:
    execution_id = platform.invoke(shouts(7))
    assert platform.wait(execution_id, "suspended")["suspension"]["step"] == 4
    # Raised to 4: step 5 reaches it.
    decide(platform, execution_id, {"decision": "approved", "value": 4})
    again = platform.wait(execution_id, "suspended", "failed", "completed")
    assert again["status"] == "suspended", again
    assert again["suspension"]["step"] == 5
    assert again["suspension"]["payload"]["value"] == 4 and again["suspension"]["payload"]["figure"] == 5
    decide(platform, execution_id, {"decision": "rejected", "reviewer_notes": "a runaway"})
    view = platform.wait(execution_id, "failed", "completed")
    assert view["status"] == "failed", view
    assert view["error"]["category"] == "budget_exceeded"
    assert "a runaway" in view["error"]["explanation"]
    refused = [r for r in platform.audit(execution_id) if r["kind"] == "tool" and r.get("detail")]
    assert refused[-1]["decision"] == "rejected"
    assert refused[-1]["detail"]["limit"] == "maxStepsPerExecution"
    assert refused[-1]["error_category"] == "budget_exceeded"


def test_a_limit_holds_decision_body_is_checked_naming_the_field(platform: Platform) -> None:
    execution_id = platform.invoke(shouts(4))
    assert platform.wait(execution_id, "suspended")["suspension"]["kind"] == "limit"
    with platform.client() as client:
        resume = RESUME.format(execution_id=execution_id)
        bad_value = client.post(resume, json={"decision": "approved", "value": "lots"})
        bad_args = client.post(resume, json={"decision": "approved", "args": {"text": "other"}})
    assert bad_value.status_code == 400, bad_value.text
    assert "value" in bad_value.text
    assert bad_args.status_code == 400, bad_args.text
    assert "args" in bad_args.text
    decide(platform, execution_id, {"decision": "approved"})
    assert platform.wait(execution_id, "completed", "failed")["status"] == "completed"
