"""An execution as an A2A task, a message as an input or a decision (oe/a2a_mapping.py, issue 38)."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, TaskState
from google.protobuf import json_format, struct_pb2

from agent_runtime.oe.a2a_mapping import (
    SCHEME,
    MessageProblem,
    agent_card,
    from_value,
    message_decision,
    message_input,
    progress_update,
    task_of,
    to_value,
)
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.store.base import EventRecord, ExecutionRecord
from agent_runtime.protocol import CallError, ExecutionState

pytestmark = pytest.mark.unit
S = ExecutionState


def record(status: ExecutionState, **fields: Any) -> ExecutionRecord:
    return ExecutionRecord(
        execution_id="e1",
        agent="team-a/loop",
        project_id="team-a",
        workspace_id="team-a.loop",
        session_id="s1",
        status=status,
        created_at=1.0,
        updated_at=2.5,
        **fields,
    )


def data(value: Any) -> Part:
    part = Part()
    part.data.CopyFrom(json_format.ParseDict(value, struct_pb2.Value()))
    return part


@pytest.mark.parametrize(
    "value",
    [None, True, 3, 2.5, "x", [1, "a", None], {"mode": "calls", "calls": [["shout", {"text": "hi"}]]}],
)
def test_json_goes_through_a_data_part_unchanged(value: Any) -> None:
    assert from_value(to_value(value)) == value


def test_the_input_is_one_data_parts_json_or_the_text_parts_joined() -> None:
    assert message_input(Message(parts=[data({"a": [1, 2]})])) == {"a": [1, 2]}
    assert message_input(Message(parts=[Part(text="one"), Part(text="two")])) == "one\ntwo"
    with pytest.raises(MessageProblem) as empty:
        message_input(Message())
    assert empty.value.field == "message.parts"
    with pytest.raises(MessageProblem) as url:
        message_input(Message(parts=[Part(text="x"), Part(url="http://127.0.0.1/f")]))
    assert url.value.field == "message.parts[1]" and "url" in url.value.problem
    with pytest.raises(MessageProblem, match="mixes text and data"):
        message_input(Message(parts=[Part(text="x"), data({})]))


def test_a_decision_is_one_data_part() -> None:
    assert message_decision(Message(parts=[data({"decision": "approved"})])) == {"decision": "approved"}
    with pytest.raises(MessageProblem, match="one data part"):
        message_decision(Message(parts=[Part(text="approve")]))


@pytest.mark.parametrize(
    ("status", "state"),
    [
        (S.QUEUED, TaskState.TASK_STATE_SUBMITTED),
        (S.PENDING, TaskState.TASK_STATE_SUBMITTED),
        (S.RUNNING, TaskState.TASK_STATE_WORKING),
        (S.CANCELLED, TaskState.TASK_STATE_CANCELED),
    ],
)
def test_each_state_has_its_task_state(status: ExecutionState, state: int) -> None:
    task = task_of(record(status))
    assert (task.id, task.context_id, task.status.state) == ("e1", "s1", state)
    assert not task.artifacts and not task.status.message.parts


def test_a_completed_task_carries_the_result_as_its_artifact() -> None:
    text = task_of(record(S.COMPLETED, result="done"))
    assert text.status.state == TaskState.TASK_STATE_COMPLETED
    assert text.artifacts[0].artifact_id == "result" and text.artifacts[0].parts[0].text == "done"
    structured = task_of(record(S.COMPLETED, result={"n": 1}))
    assert from_value(structured.artifacts[0].parts[0].data) == {"n": 1}


def test_a_held_task_is_input_required_and_describes_the_held_call() -> None:
    held = {"kind": "approval_required", "step": 2, "tool": "transfer", "args": {"amount": 5}, "reason": "r"}
    task = task_of(record(S.SUSPENDED, suspension=held))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    text, described = task.status.message.parts
    assert "transfer" in text.text and "step 2" in text.text
    view = from_value(described.data)
    assert (
        view["asks"] == held
        and view["may_edit_args"] is True
        and view["decisions"] == ["approved", "rejected"]
    )
    assert task.status.message.task_id == "e1"


def test_a_failed_task_says_why() -> None:
    task = task_of(record(S.FAILED, error=CallError(category="entrypoint_error", explanation="boom")))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.parts[0].text == "entrypoint_error: boom"


def test_a_streamed_event_is_a_working_update_carrying_the_event() -> None:
    event = EventRecord(execution_id="e1", seq=4, type="step_started", step=1, data={"tool": "shout"}, at=3.0)
    update = progress_update(event, context_id="s1")
    assert update.status.state == TaskState.TASK_STATE_WORKING
    body = from_value(update.status.message.parts[0].data)
    assert body == {"type": "step_started", "seq": 4, "step": 1, "data": {"tool": "shout"}}
    created = EventRecord(execution_id="e1", seq=1, type="created", data={}, at=1.0)
    assert progress_update(created, context_id="s1").status.state == TaskState.TASK_STATE_SUBMITTED


def test_the_card_lists_the_tools_as_skills_and_requires_the_bearer_scheme() -> None:
    reg = AgentRegistration.model_validate(
        {
            "agent": "team-a/loop",
            "token": "t",
            "aerUrl": "http://127.0.0.1:1",
            "toolUrl": "http://127.0.0.1:2",
            "tools": [
                {"name": "shout", "location": "remote"},
                {"name": "transfer", "location": "remote", "sensitive": True},
            ],
        }
    )
    card = agent_card(reg, url="http://127.0.0.1:8080/a2a/team-a/loop/")
    assert card.name == "loop" and card.capabilities.streaming and not card.capabilities.push_notifications
    assert {skill.id: "sensitive" in skill.tags for skill in card.skills} == {
        "shout": False,
        "transfer": True,
    }
    assert card.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert card.security_schemes[SCHEME].http_auth_security_scheme.scheme == "Bearer"
    assert SCHEME in card.security_requirements[0].schemes
    bare = agent_card(reg.model_copy(update={"tools": ()}), url="http://x/")
    assert [skill.id for skill in bare.skills] == ["loop"]
