"""Human review end to end (issue 14): suspend from a tool, from agent code and by policy; resume on both
routes with every bad input refused; replay on resume (the seed's four-step example); a reviewer's view."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.integration.loop.harness import CLIENT_TOKEN, PLANTED, Platform

GATEWAY = "/api/v1/projects/{project}/executions/{execution_id}/resume"


def review_task(**extra: Any) -> dict[str, Any]:
    return {"mode": "review", "policy": "P-7", **extra}


def calls(*pairs: tuple[str, dict[str, object]]) -> dict[str, object]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def gateway(execution_id: str, project: str = "team-a") -> str:
    return GATEWAY.format(project=project, execution_id=execution_id)


def tool_records(platform: Platform, execution_id: str) -> list[tuple[int, str, str]]:
    return [
        (r["step"], r["tool"], r["decision"])
        for r in platform.audit(execution_id)
        if r["kind"] in ("tool", "llm") and r["decision"] != "callback_result"
    ]


def events_until(platform: Platform, execution_id: str, wanted: str) -> list[dict[str, Any]]:
    """The execution's events up to the first of type `wanted` (the stream itself stays open while
    suspended, so the reader stops there)."""
    seen: list[dict[str, Any]] = []
    with platform.client() as client, client.stream("GET", f"/execution/{execution_id}/events") as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line.removeprefix("data: ")))
                if seen[-1]["type"] == wanted:
                    return seen
    raise AssertionError(f"the stream ended without a {wanted!r} event: {seen}")


def ledger(platform: Platform) -> list[str]:
    return platform.ledger.read_text().splitlines() if platform.ledger.exists() else []


@pytest.mark.parametrize("agent_level", [False, True], ids=["in-a-tool", "in-agent-code"])
def test_the_seeds_four_step_example_replays_and_runs_the_new_step_once(
    platform: Platform, agent_level: bool
) -> None:
    execution_id = platform.invoke(review_task(agent_level=agent_level))
    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    tool = "app.suspend" if agent_level else "human_review"
    suspension = view["suspension"]
    assert (suspension["kind"], suspension["step"], suspension["tool"]) == ("suspend", 3, tool)
    assert suspension["payload"] == {"summary": "P-7: 3 claims over the limit"}
    assert ledger(platform) == [], "the notification is the step after the review"

    # What a reviewer sees: in the list, the event stream and the reviewer's view.
    with platform.client() as client:
        listed = client.get("/executions", params={"status": "suspended", "project": "team-a"}).json()
        assert [item["suspension"]["step"] for item in listed["items"]] == [3]
        pending = client.get("/api/v1/projects/team-a/reviews").json()["items"]
        assert client.get("/api/v1/projects/team-b/reviews").json()["items"] == []
    assert len(pending) == 1
    assert pending[0]["execution_id"] == execution_id
    assert pending[0]["asks"] == {
        "kind": "suspend",
        "step": 3,
        "tool": tool,
        "reason": "approve the claims?" if agent_level else "a human must approve the claims",
        "payload": {"summary": "P-7: 3 claims over the limit"},
    }
    assert pending[0]["resume"] == gateway(execution_id) and pending[0]["may_edit_args"] is False
    suspended_event = events_until(platform, execution_id, "suspended")[-1]
    assert suspended_event["data"]["suspension"]["step"] == 3

    with platform.client() as client:
        resumed = client.post(gateway(execution_id), json={"decision": "approved", "reviewer_notes": "go"})
        assert resumed.status_code == 202, resumed.text
        assert client.get("/api/v1/projects/team-a/reviews").json()["items"] == []
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    decision = {"decision": "approved", "reviewer_notes": "go"}
    assert view["result"] == {"decision": decision, "sent": {"sent": "claims approved"}}
    assert ledger(platform) == ["notify claims approved"]
    assert [r["decision"] for r in view["reviews"]] == ["approved"]
    second_run = tool_records(platform, execution_id)[3:]
    # Resume: steps 1 and 2 from the cache, step 3 answered with the human's decision, step 4 new.
    assert second_run == [
        (1, "lookup_policy", "cached"),
        (2, "query_mongogpt", "cached"),
        (3, tool, "reviewed"),
        (4, "send_notification", "allow"),
    ]


def test_a_diverging_replay_fails_with_replay_diverged_and_runs_nothing(platform: Platform) -> None:
    variant = platform.tmp / "variant"
    execution_id = platform.invoke(review_task(variant_file=str(variant)))
    assert platform.wait(execution_id)["status"] == "suspended"
    variant.write_text("ask something else on the replay")
    with platform.client() as client:
        assert client.post(gateway(execution_id), json={"decision": "approved"}).status_code == 202
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "failed" and view["error"]["category"] == "replay_diverged", view
    assert "step 2" in view["error"]["explanation"]
    assert ledger(platform) == []
    # The first run's three steps, then the replay: step 1 cached, step 2 diverged, nothing after it.
    assert tool_records(platform, execution_id)[3:] == [
        (1, "lookup_policy", "cached"),
        (2, "query_mongogpt", "diverged"),
    ]


def test_an_approver_edits_the_arguments_and_the_audit_keeps_both(
    tmp_path, spawn, llm_peer, provider_url
) -> None:
    platform = Platform(
        tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url
    ).start()
    execution_id = platform.invoke(calls(("transfer", {"amount": 5, "to": "bob"})))
    view = platform.wait(execution_id)
    assert view["suspension"]["kind"] == "approval_required"
    with platform.client() as client:
        pending = client.get("/api/v1/projects/team-a/reviews").json()["items"]
        assert pending[0]["asks"]["args"] == {"amount": 5, "to": "bob"} and pending[0]["may_edit_args"]
        edited = {"amount": 7, "to": "bob"}
        response = client.post(gateway(execution_id), json={"decision": "approved", "args": edited})
        assert response.status_code == 202, response.text
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert ledger(platform) == ["7 bob"]
    records = platform.audit(execution_id)
    resume = next(r for r in records if r["kind"] == "resume")
    assert resume["args"] == {"requested": {"amount": 5, "to": "bob"}, "executed": {"amount": 7, "to": "bob"}}
    ran = [r for r in records if r["kind"] == "tool" and r["decision"] == "approved"]
    assert len(ran) == 1 and ran[0]["args"] == resume["args"]


def test_a_rejection_is_a_tool_error_the_agent_sees_and_an_approved_local_tool_runs_edited(
    tmp_path, spawn, llm_peer, provider_url
) -> None:
    platform = Platform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=provider_url,
        policy={"requireApproval": ["word_count"]},
    ).start()
    rejected = platform.invoke(calls(("transfer", {"amount": 5, "to": "eve"}), ("shout", {"text": "after"})))
    assert platform.wait(rejected)["status"] == "suspended"
    with platform.client() as client:
        response = client.post(gateway(rejected), json={"decision": "rejected", "reviewer_notes": "not eve"})
        assert response.status_code == 202
    view = platform.wait(rejected, "completed", "failed")
    assert view["status"] == "completed", view
    first, second = view["result"]["results"]
    assert first["error"] == "ToolExecutionError" and "rejected by reviewer: not eve" in first["text"]
    assert second == {"loud": "AFTER"}
    assert ledger(platform) == []

    local = platform.invoke(calls(("word_count", {"text": "one two"})))
    view = platform.wait(local)
    assert view["suspension"]["tool"] == "word_count"
    with platform.client() as client:
        edited = {"decision": "approved", "args": {"text": "one two three four"}}
        assert client.post(gateway(local), json=edited).status_code == 202
    view = platform.wait(local, "completed", "failed")
    assert view["result"]["results"] == [{"words": 4}], view


def test_bad_resumes_get_their_status_and_leave_the_execution_unchanged(platform: Platform) -> None:
    execution_id = platform.invoke(review_task())
    assert platform.wait(execution_id)["status"] == "suspended"
    internal = f"/resume/{execution_id}"

    def snapshot(client: httpx.Client) -> tuple[Any, ...]:
        view = client.get(f"/execution/{execution_id}").json()
        return view, len(platform.audit(execution_id))

    cases: list[tuple[str, str, Any, int, str, str]] = [
        # (route, path, body, status, field or error, words the problem must contain)
        ("gateway", gateway("0" * 32), {"decision": "approved"}, 404, "execution_not_found", "no execution"),
        (
            "gateway",
            gateway(execution_id, "team-b"),
            {"decision": "approved"},
            404,
            "execution_not_found",
            "team-b",
        ),
        (
            "internal",
            "/resume/" + "0" * 32,
            {"human_review": {"decision": "approved"}},
            404,
            "execution_not_found",
            "",
        ),
        ("gateway", gateway(execution_id), {}, 400, "decision", "required"),
        ("gateway", gateway(execution_id), {"reviewer_notes": "x"}, 400, "decision", "required"),
        ("gateway", gateway(execution_id), {"decision": 1}, 400, "decision", "got a number"),
        ("gateway", gateway(execution_id), {"decision": None}, 400, "decision", "got null"),
        ("gateway", gateway(execution_id), {"decision": ["approved"]}, 400, "decision", "got a list"),
        ("gateway", gateway(execution_id), {"decision": "maybe"}, 400, "decision", "unknown decision"),
        ("gateway", gateway(execution_id), {"decision": "APPROVED"}, 400, "decision", "unknown decision"),
        (
            "gateway",
            gateway(execution_id),
            {"decision": "approved", "force": True},
            400,
            "force",
            "unknown field",
        ),
        (
            "gateway",
            gateway(execution_id),
            {"decision": "approved", "reviewer_notes": 3},
            400,
            "reviewer_notes",
            "",
        ),
        ("gateway", gateway(execution_id), {"decision": "approved", "args": [1]}, 400, "args", "object"),
        (
            "gateway",
            gateway(execution_id),
            {"decision": "rejected", "args": {"a": 1}},
            400,
            "args",
            "approved",
        ),
        (
            "gateway",
            gateway(execution_id),
            {"decision": "approved", "args": {"a": 1}},
            400,
            "args",
            "app.suspend",
        ),
        (
            "gateway",
            gateway(execution_id),
            {"human_review": {"decision": "approved"}},
            400,
            "human_review",
            "flat",
        ),
        (
            "gateway",
            gateway(execution_id),
            {"human_review": {"decision": "approved"}, "decision": "approved"},
            400,
            "human_review",
            "flat",
        ),
        ("gateway", gateway(execution_id), ["approved"], 400, "(body)", "JSON object"),
        ("internal", internal, {"decision": "approved"}, 400, "human_review", "required"),
        (
            "internal",
            internal,
            {"human_review": {"decision": "maybe"}},
            400,
            "human_review.decision",
            "unknown",
        ),
        ("internal", internal, {"human_review": {}, "extra": 1}, 400, "extra", "unknown field"),
        ("internal", internal, {"human_review": "approved"}, 400, "human_review", "object"),
    ]
    with platform.client() as client:
        before = snapshot(client)
        for route, path, body, status, field, words in cases:
            response = client.post(path, json=body)
            assert response.status_code == status, (route, body, response.text)
            answer = response.json()
            if status == 404:
                assert answer["error"] == field and words in answer["detail"], answer
            else:
                problems = {p["field"]: p["problem"] for p in answer["detail"]}
                assert field in problems and words in problems[field], (body, answer)
        for path in (gateway(execution_id), internal):
            huge = client.post(
                path, content=b'{"decision": "approved", "reviewer_notes": "' + b"x" * 5_000_000
            )
            assert huge.status_code == 413 and "resume body" in huge.json()["detail"][0]["problem"]
            assert client.post(path, content=b"{not json").status_code == 400
        unauthorized = httpx.post(platform.oe_url + gateway(execution_id), json={"decision": "approved"})
        assert unauthorized.status_code == 401
        assert snapshot(client) == before, "a refused resume must change nothing"

        accepted = client.post(internal, json={"human_review": {"decision": "approved"}})
        assert accepted.status_code == 202, accepted.text
        again = client.post(gateway(execution_id), json={"decision": "approved"})
        assert again.status_code == 409 and "already resumed (approved at step 3)" in again.json()["detail"]
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed" and len(view["reviews"]) == 1
    with platform.client() as client:
        late = client.post(gateway(execution_id), json={"decision": "rejected"})
        assert late.status_code == 409 and late.json()["error"] == "not_suspended"
        never = platform.invoke(calls(("shout", {"text": "x"})))
        platform.wait(never)
        not_suspended = client.post(gateway(never), json={"decision": "approved"})
        assert not_suspended.status_code == 409 and "not suspended" in not_suspended.json()["detail"]
    assert ledger(platform) == ["notify claims approved"]
    assert all(secret not in response.text for secret in PLANTED if secret != CLIENT_TOKEN)


def test_reviewer_view_pages_and_a_cancel_takes_an_execution_off_it(platform: Platform) -> None:
    ids = [platform.invoke(review_task()) for _ in range(3)]
    for execution_id in ids:
        assert platform.wait(execution_id)["status"] == "suspended"
    with platform.client() as client:
        first = client.get("/api/v1/projects/team-a/reviews", params={"limit": 2}).json()
        rest = client.get(
            "/api/v1/projects/team-a/reviews", params={"limit": 2, "cursor": first["next_cursor"]}
        ).json()
        assert [i["execution_id"] for i in first["items"] + rest["items"]] == ids[::-1]
        assert rest["next_cursor"] is None
        assert client.get("/api/v1/projects/team-a/reviews", params={"limit": 0}).status_code == 400
        assert client.get("/api/v1/projects/team-a/reviews", params={"cursor": "nope"}).status_code == 400
        assert client.post(f"/execution/{ids[0]}/cancel").status_code == 200
        left = client.get("/api/v1/projects/team-a/reviews").json()["items"]
        assert [i["execution_id"] for i in left] == ids[:0:-1]
    # The stream shows the suspension with its payload, then the cancel ends it.
    time.sleep(0.1)
    assert events_until(platform, ids[0], "cancelled")[-1]["type"] == "cancelled"
