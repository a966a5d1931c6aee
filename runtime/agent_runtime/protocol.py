"""The wire contracts between the Orchestration Engine, the AER and the Tool Pod (pydantic models).

One module for every body that crosses a component boundary, so both ends of a call import the same
model. Field names follow `shared/specs/runtime-contracts.md` (Decisions 2, 3 and 5, OE-04 to OE-13, B-12).
Requests ignore unknown fields (a newer peer may send more); answers are built only by us.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# The literal tool name that marks an LLM call on `/tool/execute` (Decision 3).
INVOKE_LLM = "invoke_llm"
# The step `app.suspend` takes when agent code (not a tool) calls it: the OE holds it like an approval and
# answers it, once resumed, with the human's decision. The dot keeps it apart from every tenant tool name.
AGENT_SUSPEND = "app.suspend"

# Paths.
AER_EXECUTE_PATH = "/execute"
AER_EXECUTION_PATH = "/executions/{execution_id}"
TOOL_EXECUTE_PATH = "/execute"
INVOKE_LLM_PATH = "/invoke_llm"
# OE -> Tool Pod: run one connector's test_connection where its credential lives (answers a TestResult).
CONNECTOR_TEST_PATH = "/connectors/{name}/test"
OE_TOOL_EXECUTE_PATH = "/tool/execute"
OE_TOOL_RESULT_PATH = "/tool/result"
OE_CALLBACK_PATH = "/executor/callback"
# AER -> OE: one chunk of a LangGraph stream mode the execution's client asked for (issue 32).
OE_GRAPH_STREAM_PATH = "/tool/stream"
# Both runtimes (AER and Tool Pod): stop an execution's work, or one call of it (DR-01, IC-01).
DRAIN_PATH = "/drain"
INTERRUPT_CALL_PATH = "/interrupt/call"

# Error categories the platform adds to the Tool Pod's and the connector core's.
POLICY_DENIED = "policy_denied"
REPLAY_DIVERGED = "replay_diverged"
TOOL_POD_UNREACHABLE = "tool_pod_unreachable"
UNKNOWN_LLM = "unknown_llm"
LLM_ERROR = "llm_error"
ENTRYPOINT_ERROR = "entrypoint_error"
PLATFORM_FAILURE = "platform_failure"
AER_LOST = "aer_lost"
REJECTED_BY_REVIEWER = "rejected_by_reviewer"
CANCELLED = "cancelled"
INVALID_RESULT = "invalid_result"
# A call whose runner died while it ran: it may have taken effect, so it is never run again.
OUTCOME_UNKNOWN = "outcome_unknown"

_ID = Field(min_length=1, max_length=256)

# Integer ranges at the edge (issue 27): every number a route takes fits what the stores hold (SQLite and
# BSON integers are signed 64-bit; a Python int past that is an OverflowError deep in a driver, a 500).
# Tighter where the value has a meaning: no execution takes two billion steps, no deadline is past 9999.
MAX_STEP = 2**31 - 1
MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MAX_DURATION_MS = 1e12  # about 31 years
MAX_INT64 = 2**63 - 1
Step = Annotated[int, Field(ge=1, le=MAX_STEP)]
OptionalStep = Annotated[int, Field(ge=0, le=MAX_STEP)]
DurationMs = Annotated[float, Field(ge=0, le=MAX_DURATION_MS, allow_inf_nan=False)]


class Request(BaseModel):
    """A body we receive: unknown fields are ignored, so an older receiver accepts a newer sender."""

    model_config = ConfigDict(extra="ignore")


def validation_problems(exc: ValidationError) -> list[dict[str, str]]:
    """Pydantic errors as {field, problem}, without the offending input (it may be a secret)."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        field = ".".join(str(part) for part in error["loc"]) or "(body)"
        problems.append({"field": field, "problem": error["msg"]})
    return problems


class ExecutionState(StrEnum):
    """Client-facing execution states (lower case, Decision 2)."""

    QUEUED = "queued"  # over maxConcurrentExecutions with onLimit: queue; started in order as slots free
    PENDING = "pending"
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATES = frozenset({ExecutionState.COMPLETED, ExecutionState.FAILED, ExecutionState.CANCELLED})


class CallbackStatus(StrEnum):
    """The AER's final word on a run (upper case, as S1 writes it)."""

    COMPLETED = "COMPLETED"
    SUSPENDED = "SUSPENDED"
    FAILED = "FAILED"


def state_of_callback(status: CallbackStatus) -> ExecutionState:
    """The one mapping between the callback's upper-case names and the client-facing states."""
    return ExecutionState(status.value.lower())


class CallError(BaseModel):
    """A classified failure, safe to show to the model, the client and the audit log."""

    category: str = Field(min_length=1, max_length=128)
    explanation: str = Field(default="", max_length=16_384)
    status_code: int | None = Field(default=None, ge=0, le=999)


# OE -> AER ------------------------------------------------------------------------------------------------


class SuspendReply(BaseModel):
    """The human's answer to an agent-level `app.suspend` at `step`, handed to a resumed run up front: agent
    code calls `app.suspend` synchronously, so its replayed answer cannot wait for a round trip."""

    step: Step
    reason: str
    payload: Any = None
    decision: Literal["approved", "rejected"]
    reviewer_notes: str | None = None
    # The hold's kind (suspend, interrupt, breakpoint) and, for an approved interrupt, the reviewer's value.
    kind: str = "suspend"
    value: Any = None

    def answer(self) -> dict[str, Any]:
        """What the held step answers once decided: the decision, and an interrupt's value."""
        out: dict[str, Any] = {"decision": self.decision, "reviewer_notes": self.reviewer_notes}
        if self.kind == "interrupt":
            out["value"] = self.value
        return out


# LangGraph's stream modes a client may ask for (`stream_mode` on /invoke, as LangGraph's server takes it).
StreamMode = Literal["values", "updates", "messages", "custom"]
# LangGraph's modes the platform does not publish: `events` is `astream_events`, whose callback events
# (every runnable's start and end, inputs included) would bypass the result redaction and size cap.
REFUSED_STREAM_MODES = {
    "events": "LangGraph's astream_events",
    "debug": "LangGraph's debug stream",
    "tasks": "LangGraph's task stream",
    "checkpoints": "LangGraph's checkpoint stream",
}


class AERExecuteRequest(Request):
    """`POST /execute` on the AER: start (or, with `resume`, re-run) one execution. Answered 202."""

    execution_id: str = _ID
    workspace_id: str = Field(default="", max_length=256)
    session_id: str | None = Field(default=None, max_length=256)
    user_id: str | None = Field(default=None, max_length=256)
    org_id: str | None = Field(default=None, max_length=256)
    input: Any = None
    resume: bool = False
    suspend_replies: list[SuspendReply] = Field(default_factory=list)
    # The OE's signed statement (audience memory) for this run's user and org: the run's MemoryClient
    # presents it, and the Memory server takes user and org from it alone (issue 27). Never logged.
    memory_credential: str | None = Field(default=None, max_length=4096, repr=False)
    # The LangGraph stream modes the client asked for: the AER runs the graph with `astream` and sends
    # each chunk of these modes to the OE (`/tool/stream`). Empty: `ainvoke`, nothing sent.
    stream_mode: list[StreamMode] = Field(default_factory=list)
    # The Agent's agentRef tools as a model is shown them ({name, description, inputSchema}; issue 38): the
    # OE runs them itself, so no bundle lists them; the run's tools include them. Empty: none.
    agent_refs: list[dict[str, Any]] = Field(default_factory=list, max_length=64)


class AERExecutionStatus(BaseModel):
    """The AER's answer to `POST /execute` (202) and to `GET /executions/{id}` (200) while it runs it.

    `pod_name` and `pod_address` say which pod answered, so the OE drains that pod directly (Decision 8).
    """

    execution_id: str
    state: Literal["running"] = "running"
    pod_name: str | None = None
    pod_address: str | None = None


# AER -> OE ------------------------------------------------------------------------------------------------


class ToolExecuteRequest(Request):
    """`POST /tool/execute`: one intercepted call. An LLM call has `tool == "invoke_llm"` and `messages`."""

    execution_id: str = _ID
    step: Step
    tool: str = Field(min_length=1, max_length=256)
    args: dict[str, Any] = Field(default_factory=dict)
    llm_id: str | None = Field(default=None, max_length=256)
    messages: list[dict[str, Any]] | None = None
    # LLM calls: the tool schemas offered to the model and per-call options (temperature, ...).
    tools: list[dict[str, Any]] | None = None
    options: dict[str, Any] | None = None
    # LLM calls: the agent streams this call (`astream`), so the OE publishes its deltas (None: it does
    # not, and the field stays off the wire).
    stream: bool | None = None
    # The agent of a multi-agent graph that makes the call (a LangGraph subagent's `lc_agent_name`, LG-15):
    # the audit, the execution log and the events name it. Not part of the replay fingerprint.
    agent_name: str | None = Field(default=None, max_length=256)

    @property
    def is_llm(self) -> bool:
        return self.tool == INVOKE_LLM


CallStatus = Literal["success", "error", "suspend"]


class ToolExecuteAnswer(BaseModel):
    """The OE's answer; exactly one of: a denial, a callback route, or a final outcome (OE-06).

    On a callback route, `args` (when set) are the arguments a reviewer approved: run the tool with them.
    On a final outcome, `args` (when set) are the arguments the call ran with, a reviewer's edit.
    """

    step: int
    proceed: bool
    reason: str | None = None
    route_to: Literal["callback"] | None = None
    args: dict[str, Any] | None = None
    status: CallStatus | None = None
    result: Any = None
    error: CallError | None = None
    from_cache: bool = False
    duration_ms: float | None = None
    pod_name: str | None = None
    # A model call the agent streamed (`stream: true` on the request, the SDK's astream): its deltas as the
    # OE published them (redacted, in order), so a LangGraph `messages` stream gives one chunk per piece.
    deltas: list[LLMDelta] | None = None


class GraphStreamChunk(Request):
    """`POST /tool/stream`: one chunk of a LangGraph stream mode, published as an event named `mode`."""

    execution_id: str = _ID
    mode: StreamMode
    data: Any = None


class ToolResultRequest(Request):
    """`POST /tool/result`: the outcome of a local tool the AER ran after `route_to: "callback"`."""

    execution_id: str = _ID
    step: Step
    status: CallStatus
    result: Any = None
    error: CallError | None = None
    duration_ms: DurationMs | None = None


class ExecutorCallback(Request):
    """`POST /executor/callback`: the end of one run of the entrypoint."""

    execution_id: str = _ID
    status: CallbackStatus
    result: Any = None
    metadata: dict[str, Any] | None = None
    error: CallError | None = None


# OE -> Tool Pod -------------------------------------------------------------------------------------------


class ToolPodExecuteRequest(Request):
    """`POST /execute` on the Tool Pod: run one remote tool (the OE sends `args` as `arguments`)."""

    tool: str = Field(min_length=1, max_length=256)
    arguments: dict[str, Any] = Field(default_factory=dict)
    execution_id: str | None = Field(default=None, max_length=256)
    step: OptionalStep | None = None
    # The execution's user and org, and the OE's memory statement for them: a tenant tool body's
    # MemoryClient presents it (issue 27). Sent with tool calls only, never with a model call. Never logged.
    user_id: str | None = Field(default=None, max_length=256)
    org_id: str | None = Field(default=None, max_length=256)
    memory_credential: str | None = Field(default=None, max_length=4096, repr=False)


class InvokeLLMRequest(Request):
    """`POST /invoke_llm` on the Tool Pod: run the model registered under `llm_id` once."""

    llm_id: str = Field(min_length=1, max_length=256)
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    options: dict[str, Any] | None = None
    stream: bool = False
    execution_id: str | None = Field(default=None, max_length=256)
    step: OptionalStep | None = None


class ToolCallDelta(BaseModel):
    """A piece of one tool call the model is writing: `id` and `name` come once, `arguments` in pieces."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class LLMDelta(BaseModel):
    """One piece of a streamed model answer (the `llm_delta` event's data, and a line of `/invoke_llm`'s
    NDJSON stream). Joined in `index` order the pieces give the final message: `text` its content,
    `extra` its extra text fields (`reasoning_content`), `tool_calls` its calls' ids, names and argument
    text. The last piece has `finish_reason` and `usage`; `from_cache` marks a replayed step's whole
    message sent as one piece."""

    step: int | None = None
    index: int = 0
    id: str | None = None
    text: str = ""
    extra: dict[str, str] = Field(default_factory=dict)
    tool_calls: list[ToolCallDelta] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    last: bool = False
    from_cache: bool = False


class CallOutcome(BaseModel):
    """What the Tool Pod answers on `/execute` and `/invoke_llm`; the OE caches exactly this per step.

    `status: "suspend"` (a tool called `app.suspend`) carries `result = {"reason", "payload"}`; the signal is
    the status, never a value inside `result` (OE-14).
    """

    status: CallStatus
    result: Any = None
    error: CallError | None = None
    duration_ms: float = 0.0
    pod_name: str | None = None
    # The answering pod's own base URL (`http://<pod IP>:8002`): where the OE sends a drain (Decision 8).
    pod_address: str | None = None


# Client -> OE ---------------------------------------------------------------------------------------------


class InvokeRequest(Request):
    """`POST /invoke`: run one Agent (`<namespace>/<name>`) on `input`."""

    agent: str = Field(min_length=3, max_length=317, pattern=r"^[a-z0-9][-a-z0-9]*/[a-z0-9][-.a-z0-9]*$")
    input: Any = None
    session_id: str | None = Field(default=None, max_length=256)
    user_id: str | None = Field(default=None, max_length=256)
    org_id: str | None = Field(default=None, max_length=256)
    # Streaming (issue 32): the model's tokens as `llm_delta` events; LangGraph's stream modes as events
    # of those names; `step_results: false` keeps results out of `step_finished` events.
    stream: bool = False
    stream_mode: list[StreamMode] | StreamMode | None = None
    step_results: bool = True

    @field_validator("stream_mode", mode="before")
    @classmethod
    def _offered_modes(cls, value: Any) -> Any:
        # LangGraph's other modes: a clear refusal naming what to ask for instead (issue 32).
        asked = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        refused = [mode for mode in asked if isinstance(mode, str) and mode in REFUSED_STREAM_MODES]
        if refused:
            raise ValueError(
                f"stream mode {refused[0]!r} ({REFUSED_STREAM_MODES[refused[0]]}) is not offered; ask for "
                "values, updates, messages or custom (a model's tokens: messages, or stream: true for "
                "llm_delta events)"
            )
        return value

    def stream_modes(self) -> list[str]:
        """The stream modes asked for, once each, in the order given."""
        modes = [self.stream_mode] if isinstance(self.stream_mode, str) else list(self.stream_mode or ())
        return list(dict.fromkeys(modes))


class MemoryExportRequest(BaseModel):
    """`POST /api/v1/projects/{project}/agents/{agent}/memory-export-token`: a read-only memory statement
    for one user of that Agent, outside any execution. `user_id` defaults to the caller."""

    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1, max_length=256)
    org_id: str | None = Field(default=None, min_length=1, max_length=256)


class ReviewDecision(BaseModel):
    """A human's decision on a suspended execution (Decision 5); `args` edits an approved call."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approved", "rejected"]
    reviewer_notes: str | None = Field(default=None, max_length=16_384)
    args: dict[str, Any] | None = None
    # What a LangGraph interrupt() returns when approved (kind `interrupt` only; see oe/holds.py).
    value: Any = None


class WrappedResume(BaseModel):
    """The OE's internal `POST /resume/{execution_id}` body: `{"human_review": {...}}` only."""

    model_config = ConfigDict(extra="forbid")

    human_review: ReviewDecision


# OE -> AER and Tool Pod: drain and interrupt/call (DR-01 to DR-14, IC-01 to IC-10) ------------------------

# Error categories of a call stopped by these contracts (its own answer, IC-09), or refused at admission.
INTERRUPTED = "interrupted"
EXECUTION_DRAINED = "execution_drained"
EXECUTION_DRAINING = "execution_draining"

DrainOutcome = Literal["accepted", "completed", "timed_out", "delivery_failed"]
InterruptOutcome = Literal["interrupted", "not_found", "already_settled", "not_cancellable"]
EXECUTION_NOT_FOUND = "execution_not_found"


class DrainRequest(Request):
    """`POST /drain`: stop every tracked piece of work of one execution by `deadline_at_ms` (epoch ms).

    `workspace_id` is required, and must equal APP_ID, on a managed runtime (APP_ID set); it is checked by
    the receiver, so it is optional here.
    """

    request_id: str = _ID
    execution_id: str = _ID
    reason: str = Field(default="", max_length=1024)
    deadline_at_ms: int = Field(ge=0, le=MAX_EPOCH_MS)
    workspace_id: str | None = Field(default=None, max_length=256)


class DrainAnswer(BaseModel):
    """202 with `accepted` while the work settles; 200 with the final outcome after (DR-04)."""

    outcome: DrainOutcome
    reason_code: str | None = None
    pod_name: str | None = None
    pod_address: str | None = None


class InterruptCallRequest(Request):
    """`POST /interrupt/call`: stop the one call at `step_number` (the key is `step_number`, not `step`)."""

    execution_id: str = _ID
    step_number: int = Field(ge=0, le=MAX_STEP)
    workspace_id: str | None = Field(default=None, max_length=256)
    request_id: str | None = Field(default=None, max_length=256)  # accepted and ignored (IC-02)


class InterruptCallAnswer(BaseModel):
    """Always 200 once the workspace check passed (IC-03)."""

    outcome: InterruptOutcome
    pod_name: str | None = None
    pod_address: str | None = None
