"""The OE's durable state behind one interface: executions, steps (replay cache), audit log, events.

Every backend (SQLite, MongoDB) passes the one shared suite in tests/integration/oe/test_store.py. All
writes are durable when the call returns: a SIGKILL right after loses nothing that was acknowledged.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from agent_runtime.oe.store.deliveries import DeliveryRecord, ServedRuntime
from agent_runtime.oe.usage import Usage
from agent_runtime.protocol import CallError, CallOutcome, ExecutionState


class Identity(BaseModel):
    """Who made a client request, as the API server's TokenReview (or the static dev token) named them."""

    username: str
    uid: str | None = None
    groups: list[str] = Field(default_factory=list)


class StepDecider(BaseModel):
    """Who asked for the interrupt of one call, and when."""

    step: int
    by: Identity
    at: float


class Review(BaseModel):
    """A human decision, recorded by the resume that made it; the replay applies it at `step`."""

    step: int | None  # the suspended step (None: a suspension the OE did not hold at a step)
    tool: str | None = None
    kind: str  # approval_required | suspend
    decision: Literal["approved", "rejected"]
    reviewer_notes: str | None = None
    args: dict[str, Any] | None = None  # the reviewer's edited arguments for an approved call
    reason: str | None = None  # what an agent-level `app.suspend` asked, for its replayed answer
    payload: Any = None
    value: Any = None  # an approved LangGraph interrupt's resume value (oe/holds.py)
    at: float
    decided_by: Identity | None = None  # None: decided before the OE recorded identities


class ParentLink(BaseModel):
    """The call that started a child execution (an `agentRef` tool, issue 38): the parent execution, its
    step, its Agent, and how deep the child sits (1: the parent was started by a client)."""

    execution_id: str
    step: int
    agent: str
    depth: int = 1


class ExecutionRecord(BaseModel):
    """One execution of one Agent; `status` moves only through `Store.transition`."""

    execution_id: str
    agent: str  # "<namespace>/<name>"
    project_id: str  # the Agent's namespace
    workspace_id: str  # APP_ID: "<namespace>.<name>"
    session_id: str
    user_id: str | None = None
    org_id: str | None = None
    input: Any = None
    status: ExecutionState = ExecutionState.PENDING
    result: Any = None
    error: CallError | None = None
    suspension: dict[str, Any] | None = None  # the SUSPENDED payload while suspended
    created_at: float  # epoch seconds
    updated_at: float
    finished_at: float | None = None
    step_count: int = 0  # highest step number seen
    runs: int = 0  # how many times the AER was asked to run it (1 + resumes)
    cancel_requested: bool = False
    reviews: list[Review] = Field(default_factory=list)  # every human decision, in order
    restarts: int = 0  # runs started again after their AER lost them
    # Who invoked, cancelled and interrupted it; None/empty on rows written before identities were recorded.
    invoked_by: Identity | None = None
    cancelled_by: Identity | None = None
    interrupted_by: list[StepDecider] = Field(default_factory=list)
    # What the client asked to see as it happens (issue 32): model deltas, LangGraph stream modes, and
    # whether step_finished events carry results.
    stream: bool = False
    stream_mode: list[str] = Field(default_factory=list)
    step_results: bool = True
    # The W3C traceparent of the execution's span: every run (a resume too) is its child (oe/spans.py).
    trace_context: str | None = None
    # Set by the OE alone when an Agent's agentRef tool started this execution (oe/children.py); a record
    # field, not a column: every store keeps records as JSON, so rows written before it read as None.
    parent: ParentLink | None = None
    # A session fork's origin (oe/forks.py, issue 39): the finished execution it was forked from and the step
    # it re-ran from; record fields too, None on every execution that is not a fork.
    forked_from: str | None = None
    at_step: int | None = None

    def review_at(self, step: int) -> Review | None:
        """The decision that answers the suspension at `step`, if a resume made one."""
        return next((review for review in self.reviews if review.step == step), None)


StepState = Literal["in_progress", "done"]


class StepRecord(BaseModel):
    """The replay cache entry for `(execution_id, step)`: what was asked and, once done, its final outcome."""

    execution_id: str
    step: int
    tool: str
    fingerprint: str  # sha256 of tool name + canonical JSON of args/messages (Decision 4)
    state: StepState = "in_progress"
    owner: str = ""  # which OE process claimed it last
    run: int = 0  # the execution's run that claimed it (a local tool from an earlier run may have run)
    outcome: CallOutcome | None = None
    created_at: float
    updated_at: float


class AuditRecord(BaseModel):
    """Exactly one per call attempt (and one per refused callback); arguments already redacted."""

    execution_id: str
    step: int | None = None
    agent: str
    workspace_id: str
    kind: Literal["tool", "llm", "callback", "resume", "cancel", "restart", "drain", "interrupt", "parent"]
    tool: str | None = None
    llm_id: str | None = None
    args: Any = None  # redacted arguments (or messages for an LLM call)
    decision: str  # allow | deny | approval | cached | diverged | callback | conflict | ...
    reason: str | None = None
    route: str | None = None  # tool_pod | callback | cache | none
    from_cache: bool = False
    status: str | None = None  # success | error | suspend | accepted | refused
    error_category: str | None = None
    duration_ms: float | None = None
    pod_name: str | None = None
    decided_by: Identity | None = None  # the client behind a resume, cancel or interrupt
    partial_text: str | None = None  # a streamed model call that stopped part-way: the text it had sent
    # A model call's tokens (agent_runtime.oe.usage), the model that answered and its cost at the time.
    usage: Usage | None = None
    model: str | None = None
    cost: float | None = None
    at: float
    detail: dict[str, Any] | None = None  # a limit's refusal: {limit, value, figure}
    # The hash chain (agent_runtime/audit_chain.py), set by `Store.append_audit`: 1, 2, ... per execution,
    # the previous record's hash ("" for the first) and this record's own.
    seq: int | None = None
    prev_hash: str | None = None
    hash: str | None = None


class EventRecord(BaseModel):
    """One entry of an execution's event stream; `seq` counts from 1 per execution, without gaps."""

    execution_id: str
    seq: int
    type: str  # step_started | step_finished | suspended | resumed | completed | failed | cancelled | ...
    step: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    at: float


class Page(BaseModel):
    """A page of executions, newest first; pass `next_cursor` back to get the next one."""

    items: list[ExecutionRecord]
    next_cursor: str | None = None


class Store(Protocol):
    """The OE's persistence. Implementations: `SqliteStore` (embedded default) and `MongoStore`."""

    async def open(self) -> None:
        """Create tables/collections and indexes; idempotent."""

    async def close(self) -> None: ...

    def atomic(self) -> AbstractAsyncContextManager[None]:
        """The calls the current task makes inside the block are one transaction where the backend has them
        (PostgreSQL: all or none, rolled back by an exception leaving it); elsewhere each call is its own
        durable write, as outside it (`transactions.EachCallItsOwn`)."""

    # executions
    async def create_execution(self, record: ExecutionRecord) -> None:
        """Insert; raises KeyError if the id exists."""

    async def get_execution(self, execution_id: str) -> ExecutionRecord | None: ...

    async def transition(
        self,
        execution_id: str,
        *,
        from_states: frozenset[ExecutionState],
        changes: dict[str, Any],
    ) -> ExecutionRecord | None:
        """Atomically apply `changes` (field -> value, `status` included) if the current status is one of
        `from_states`; return the updated record, or None when the status did not match (or no such id)."""

    async def update_execution(self, execution_id: str, changes: dict[str, Any]) -> None:
        """Apply `changes` unconditionally (bookkeeping fields such as `updated_at`, never `status`)."""

    async def note_step(self, execution_id: str, step: int, *, at: float) -> None:
        """Raise `step_count` to `step` if lower and set `updated_at`."""

    async def list_executions(
        self,
        *,
        agent: str | None = None,
        project_id: str | None = None,
        project_ids: Collection[str] | None = None,
        status: ExecutionState | None = None,
        limit: int = 50,
        cursor: str | None = None,
        parent_execution_id: str | None = None,
    ) -> Page:
        """Newest first (created_at, then execution_id, descending), filtered, `limit` at most;
        `project_ids` keeps only those projects (the namespaces a client may read; empty: nothing);
        `parent_execution_id` only the children an agentRef call of that execution started (an index)."""

    async def count_executions(self) -> int: ...

    # steps: the replay cache
    async def claim_step(self, record: StepRecord) -> StepRecord | None:
        """Insert `record` if no step exists at its `(execution_id, step)`; return None when this call
        inserted it, else the existing record (unchanged)."""

    async def get_step(self, execution_id: str, step: int) -> StepRecord | None: ...

    async def finish_step(self, execution_id: str, step: int, outcome: CallOutcome, *, at: float) -> None:
        """Store the final outcome and mark the step done."""

    async def reset_step(self, execution_id: str, step: int, *, owner: str, at: float) -> None:
        """Hand an in-progress step to a new owner (a restarted OE re-driving a stale claim)."""

    async def reopen_step(self, execution_id: str, step: int, *, owner: str, run: int, at: float) -> bool:
        """Move a done step whose outcome is `suspend` back to in progress (its approved call is about to
        run), keeping the held outcome; True if this call moved it, False if it was not such a step."""

    async def delete_step(self, execution_id: str, step: int) -> None:
        """Forget an in-progress step whose call never ran (refused before anything was sent)."""

    # one-time claims
    async def claim_once(self, key: str, value: dict[str, Any]) -> dict[str, Any] | None:
        """Store `value` under `key` unless a value is there; None when this call stored it, else the value
        already stored. Atomic across processes and replicas (a unique key), on every backend."""

    # audit log: a hash chain per execution (agent_runtime/audit_chain.py), its head signed by the OE
    async def append_audit(self, record: AuditRecord) -> AuditRecord:
        """Append `record` as its execution's next link (`audit_chain.link` over the last record's
        `model_dump(mode="json")`: seq, prev_hash, hash) and return it as stored. Two appends to one
        execution at once, from any replicas, never get the same seq: a unique (execution_id, seq) makes
        the loser read the new last record and link again."""

    async def list_audit(self, execution_id: str) -> list[AuditRecord]:
        """In the order appended."""

    async def set_audit_head(self, execution_id: str, head: dict[str, Any]) -> None:
        """Keep `head` (`{execution_id, seq, hash, kid?, signature?}`, signed by the OE) unless the stored
        one has a higher seq (a slower writer of an earlier record)."""

    async def get_audit_head(self, execution_id: str) -> dict[str, Any] | None: ...

    # limits (agent_runtime/oe/limits.py)
    async def add_usage(self, key: str, deltas: dict[str, float], *, expires_at: float) -> dict[str, float]:
        """Add `deltas` to the counters under `key` (created at 0) and return every counter after the add.
        Atomic within one backend; on FerretDB v1 two replicas adding at the same instant may lose one add
        (it applies an update as a read then a write), on MongoDB they do not. `expires_at`: when the
        counters may be dropped (the day's end, an execution's horizon)."""

    async def get_usage(self, key: str) -> dict[str, float]:
        """The counters under `key` ({} when none)."""

    async def take_rate_slot(self, key: str, slots: list[int], *, expires_at: float) -> int | None:
        """Claim the first of `slots` (newest first) nobody under `key` holds and return it, or None when
        all are held. A slot is a unique key, so two replicas never hold the same one (the token bucket of
        `limits.RateWindow`). Slots below the lowest asked may be dropped."""

    # events
    async def append_event(
        self, execution_id: str, *, type: str, step: int | None, data: dict[str, Any], at: float
    ) -> EventRecord:
        """Append with the next `seq` for that execution (atomic across concurrent appends)."""

    async def list_events(
        self, execution_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[EventRecord]:
        """Events with `seq > after_seq` in `seq` order; at most `limit` of them (None: all). A listener
        catching up reads pages of `limit`, so a long stream (a model's deltas) is never held whole."""

    async def prune_events(self, *, types: Collection[str], before: float, limit: int) -> int:
        """Delete at most `limit` events of `types` stored before `before` (epoch s), never an execution's
        latest event (its next seq is counted from it); returns how many went (oe/event_retention.py)."""

    # drains and interrupts the OE delivers (OE-17, OE-18), and the runtimes that served each execution
    async def create_delivery(self, record: DeliveryRecord) -> DeliveryRecord | None:
        """Insert if no record has its `key`; None when this call inserted it, else the existing one."""

    async def get_delivery(self, key: str) -> DeliveryRecord | None: ...

    async def replace_delivery(self, record: DeliveryRecord) -> DeliveryRecord | None:
        """Write `record` if the stored version is still `record.version`; return it as stored (version + 1),
        or None when another writer got there first (read it again)."""

    async def list_deliveries(self, *, due_by: float | None = None, limit: int = 100) -> list[DeliveryRecord]:
        """Open records, soonest due first; with `due_by`, only those due by then."""

    async def note_runtime(self, runtime: ServedRuntime) -> bool:
        """Remember that this pod served the execution; True the first time, False if already known."""

    async def list_runtimes(self, execution_id: str) -> list[ServedRuntime]:
        """Every runtime noted for the execution, in the order they were first noted."""
