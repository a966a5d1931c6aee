"""An OE execution as an A2A task, and an A2A message as an OE input or decision (issue 38): pure functions.

An A2A task IS an execution: task id = execution id, context id = session id. A held execution is
`input-required`, its status message describing the held call as a reviewer's view does; a decision comes
back as a message whose one data part is the gateway resume route's flat body. The protocol's own types
(the official SDK's protobuf messages) are built here; `servers/a2a.py` does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    Artifact,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf import json_format, struct_pb2, timestamp_pb2

from agent_runtime import __version__
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.store.base import EventRecord, ExecutionRecord
from agent_runtime.oe.views import review_view
from agent_runtime.protocol import ExecutionState

S = ExecutionState
SCHEME = "agentEngineBearer"
PROTOCOL_VERSION = "1.0"
RESULT_ARTIFACT = "result"
# The decision a held task takes, as one data part: the gateway resume route's flat body.
DECISION_EXAMPLE = '{"decision": "approved" | "rejected", "reviewer_notes"?: "...", "args"?: {...}}'

TASK_STATE: dict[ExecutionState, int] = {
    S.QUEUED: TaskState.TASK_STATE_SUBMITTED,
    S.PENDING: TaskState.TASK_STATE_SUBMITTED,
    S.RUNNING: TaskState.TASK_STATE_WORKING,
    S.SUSPENDED: TaskState.TASK_STATE_INPUT_REQUIRED,
    S.COMPLETED: TaskState.TASK_STATE_COMPLETED,
    S.FAILED: TaskState.TASK_STATE_FAILED,
    S.CANCELLED: TaskState.TASK_STATE_CANCELED,
}
# Events after which a waiting send answers: the run ended, or it waits for a human.
SETTLING_EVENTS = frozenset({"suspended", "completed", "failed", "cancelled"})


@dataclass(frozen=True)
class MessageProblem(ValueError):
    """A message the OE cannot take: `field` (a JSON path in the request) and what to send instead."""

    field: str
    problem: str

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}"


# -- values -------------------------------------------------------------------------------------------


def to_value(data: Any) -> struct_pb2.Value:
    value = struct_pb2.Value()
    json_format.ParseDict(data, value)
    return value


def from_value(value: struct_pb2.Value) -> Any:
    return json_format.MessageToDict(value)


def timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1_000_000_000))
    return stamp


def data_part(data: Any) -> Part:
    return Part(data=to_value(data), media_type="application/json")


def value_part(data: Any) -> Part:
    """A result as a part: a string as text, anything else as JSON data."""
    return Part(text=data) if isinstance(data, str) else data_part(data)


# -- messages in ----------------------------------------------------------------------------------------


def _kinds(message: Message) -> list[str]:
    return [part.WhichOneof("content") or "empty" for part in message.parts]


def message_input(message: Message) -> Any:
    """The Agent's input from a new task's message: one data part's JSON, else its text parts joined."""
    kinds = _kinds(message)
    if not kinds:
        raise MessageProblem(
            "message.parts", "empty: send one data part (the Agent's JSON input) or text parts"
        )
    if kinds == ["data"]:
        return from_value(message.parts[0].data)
    if all(kind == "text" for kind in kinds):
        return "\n".join(part.text for part in message.parts)
    for index, kind in enumerate(kinds):
        if kind not in ("text", "data"):
            raise MessageProblem(
                f"message.parts[{index}]",
                f"a {kind} part is not taken: an Agent's input is one data part or text parts",
            )
    raise MessageProblem(
        "message.parts", "mixes text and data: send one data part (the Agent's JSON input) or text only"
    )


def message_decision(message: Message) -> Any:
    """The resume body a held task's message carries (checked by the gateway's `flat_review`)."""
    kinds = _kinds(message)
    if kinds != ["data"]:
        raise MessageProblem(
            "message.parts",
            f"this task waits for a human's decision: send one data part {DECISION_EXAMPLE}",
        )
    return from_value(message.parts[0].data)


# -- tasks out ------------------------------------------------------------------------------------------


def agent_message(record: ExecutionRecord, *parts: Part) -> Message:
    return Message(
        message_id=f"{record.execution_id}:{record.updated_at:.6f}",
        context_id=record.session_id,
        task_id=record.execution_id,
        role=Role.ROLE_AGENT,
        parts=list(parts),
    )


def held_call(record: ExecutionRecord, *, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a held execution asks (as the reviewers' inbox shows it) and how to answer through A2A."""
    view = review_view(record, secrets=secrets)
    return {
        "asks": view["asks"],
        "decisions": view["decisions"],
        "may_edit_args": view["may_edit_args"],
        "may_send_value": view["may_send_value"],
        "answer": f"message/send on this task with one data part {DECISION_EXAMPLE}",
    }


def task_status(record: ExecutionRecord, *, secrets: tuple[str, ...] = ()) -> TaskStatus:
    status = TaskStatus(state=TASK_STATE[record.status], timestamp=timestamp(record.updated_at))  # type: ignore[arg-type]
    if record.status is S.SUSPENDED:
        held = held_call(record, secrets=secrets)
        tool = held["asks"].get("tool", "the agent")
        text = f"waiting for a human's decision on {tool} at step {held['asks'].get('step')}"
        status.message.CopyFrom(agent_message(record, Part(text=text), data_part(held)))
    elif record.status is S.FAILED and record.error is not None:
        error = record.error.model_dump(exclude_none=True, mode="json")
        status.message.CopyFrom(
            agent_message(
                record, Part(text=f"{record.error.category}: {record.error.explanation}"), data_part(error)
            )
        )
    return status


def result_artifact(record: ExecutionRecord) -> Artifact:
    return Artifact(artifact_id=RESULT_ARTIFACT, name="result", parts=[value_part(record.result)])


def task_of(record: ExecutionRecord, *, secrets: tuple[str, ...] = ()) -> Task:
    """The execution as an A2A task: its state, the held call or the error, and the result as an artifact."""
    task = Task(id=record.execution_id, context_id=record.session_id)
    task.status.CopyFrom(task_status(record, secrets=secrets))
    if record.status is S.COMPLETED:
        task.artifacts.append(result_artifact(record))
    return task


def artifact_update(record: ExecutionRecord) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(
        task_id=record.execution_id,
        context_id=record.session_id,
        artifact=result_artifact(record),
        last_chunk=True,
    )


def status_update(record: ExecutionRecord, *, secrets: tuple[str, ...] = ()) -> TaskStatusUpdateEvent:
    update = TaskStatusUpdateEvent(task_id=record.execution_id, context_id=record.session_id)
    update.status.CopyFrom(task_status(record, secrets=secrets))
    return update


def progress_update(event: EventRecord, *, context_id: str) -> TaskStatusUpdateEvent:
    """One of the execution's streamed events (a step, a model delta, a LangGraph chunk) as a working
    status whose message carries the event as the OE's own stream has it (`type`, `seq`, `step`, `data`)."""
    state = (
        TaskState.TASK_STATE_SUBMITTED
        if event.type in ("created", "queued", "pending")
        else TaskState.TASK_STATE_WORKING
    )
    update = TaskStatusUpdateEvent(task_id=event.execution_id, context_id=context_id)
    update.status.state = state  # type: ignore[assignment]
    update.status.timestamp.CopyFrom(timestamp(event.at))
    body = {"type": event.type, "seq": event.seq, "step": event.step, "data": event.data}
    update.status.message.CopyFrom(
        Message(
            message_id=f"{event.execution_id}:{event.seq}",
            context_id=context_id,
            task_id=event.execution_id,
            role=Role.ROLE_AGENT,
            parts=[data_part(body)],
        )
    )
    update.metadata.update({"event": event.type, "seq": event.seq})
    return update


# -- the agent card -------------------------------------------------------------------------------------


def agent_card(reg: AgentRegistration, *, url: str, version: str = __version__) -> AgentCard:
    """The Agent's card: its name, its tools as skills, the OE's bearer authentication, JSON-RPC at `url`."""
    namespace, name = reg.agent.split("/", 1)
    description = (
        f"Agent {name} of namespace {namespace} on Agent Engine: every turn runs through the Orchestration "
        "Engine (policy, approvals, audit, replay)"
    )
    skills = [
        AgentSkill(
            id=tool.name,
            name=tool.name,
            description=f"{'a sensitive tool: held for approval by policy' if tool.sensitive else 'a tool'} "
            f"of {name} ({tool.location})",
            tags=["sensitive" if tool.sensitive else "tool", tool.location],
        )
        for tool in reg.tools
    ] or [AgentSkill(id=name, name=name, description=description, tags=["agent"])]
    card = AgentCard(
        name=name,
        description=description,
        version=version,
        provider=AgentProvider(organization="Agent Engine", url=url),
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION)
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["application/json", "text/plain"],
        default_output_modes=["application/json", "text/plain"],
        skills=skills,
    )
    card.security_schemes[SCHEME].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer",
                bearer_format="JWT",
                description="a token the cluster accepts for the audience of this OE (agent-engine), "
                "allowed to create agents/invoke on this Agent",
            )
        )
    )
    requirement = SecurityRequirement()
    requirement.schemes[SCHEME].CopyFrom(StringList())
    card.security_requirements.append(requirement)
    return card
