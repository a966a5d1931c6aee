"""The OE's client API as an OpenAPI 3.1 document (`GET /openapi.json`, and docs/oe-openapi.json).

Request bodies are the pydantic models the handlers parse (`InvokeRequest`, `WrappedResume`,
`ReviewDecision`, `InterruptBody`, `MemoryExportRequest`, `ThreadUpdate`, `ForkRequest`); answers are the
views the handlers build, described by the models below (their fields as the handlers fill them, further
fields allowed). The runtime routes (`/tool/execute`, `/tool/result`, `/executor/callback`) are the runtimes'
contract, not the client API, and are left out. Regenerate the checked-in copy with
`python -m agent_runtime.servers.oe_openapi > docs/oe-openapi.json` (a unit test fails when it drifts).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import models_json_schema

from agent_runtime.memory.knowledge_wire import IngestAnswer, IngestBody, SourcesAnswer
from agent_runtime.protocol import (
    ExecutionState,
    InvokeRequest,
    MemoryExportRequest,
    ReviewDecision,
    WrappedResume,
)
from agent_runtime.servers.connector_test import OE_CONNECTOR_TEST_PATH, ConnectorTestAnswer
from agent_runtime.servers.connector_types import CONNECTOR_TYPES_PATH
from agent_runtime.servers.oe_drains import InterruptBody
from agent_runtime.servers.oe_knowledge import OE_KNOWLEDGE_PATH
from agent_runtime.servers.oe_threads import ForkRequest
from agent_runtime.servers.thread_http import ThreadUpdate

OPENAPI_PATH = "/openapi.json"
REF = "#/components/schemas/{model}"


class _View(BaseModel):
    model_config = ConfigDict(extra="allow")


class KnowledgeRemoved(_View):
    """DELETE of a knowledge document: how many of its chunks were removed (0: it was not there)."""

    removed: int


class Problem(BaseModel):
    """One bad field of a request: where, and what to send instead."""

    field: str
    problem: str


class BadRequest(_View):
    """400 (and 413): each bad field named; never the offending value."""

    detail: list[Problem]


class ErrorAnswer(_View):
    """404 and 409: a code and a sentence naming the fix."""

    error: str
    detail: str


class Status(_View):
    """401 and 403: a Kubernetes Status, naming the verb, the namespace and the rule to ask for."""

    kind: Literal["Status"] = "Status"
    status: str | None = None
    message: str
    reason: str | None = None
    code: int | None = None


class Accepted(_View):
    """202 to POST /invoke: the new execution's id; follow it at /execution/{id}/events."""

    execution_id: str
    status: str


class Execution(_View):
    """An execution as clients see it: lower-case status, ISO times, no secret values."""

    execution_id: str
    agent: str
    project_id: str
    session_id: str | None = None
    status: ExecutionState
    step_count: int
    runs: int
    created_at: str | None = None
    updated_at: str | None = None
    finished_at: str | None = None
    result: Any = None
    error: dict[str, Any] | None = None
    suspension: dict[str, Any] | None = None
    reviews: list[dict[str, Any]] | None = None


class Sessions(_View):
    """A LangGraph Agent's sessions that have a thread (workspace-scoped keys only)."""

    sessions: list[str]


class SessionMessages(_View):
    """A session's messages, platform message dicts, oldest first."""

    session_id: str
    messages: list[dict[str, Any]]


class ThreadState(_View):
    """A session's thread as LangGraph's `get_state` sees it."""

    session_id: str
    values: dict[str, Any]
    next: list[str]
    interrupts: list[dict[str, Any]]
    checkpoint_id: str | None = None
    created_at: str | None = None


class ExecutionPage(_View):
    """A page of executions, newest first; `next_cursor` fetches the next."""

    items: list[Execution]
    next_cursor: str | None = None


class AuditRecords(_View):
    """Every audit record of one execution, in order, each with its chain link, and the signed head."""

    records: list[dict[str, Any]]
    head: dict[str, Any] | None = None


class AuditVerdict(_View):
    """Whether an execution's audit chain is intact, or the first record that does not fit and why."""

    execution_id: str
    intact: bool
    records: int
    head_signed: bool
    broken_at: int | None = None
    reason: str | None = None


class Review(_View):
    """A suspended execution as a reviewer sees it: what it asks, and where to send the decision."""

    execution_id: str
    agent: str
    project_id: str
    asks: dict[str, Any]
    decisions: list[str]
    may_edit_args: bool
    may_send_value: bool = False
    resume: str
    waiting_since: str | None = None


class ReviewPage(_View):
    items: list[Review]
    next_cursor: str | None = None


class Delivery(_View):
    """A drain or an interrupt and what each runtime answered (state open, quiet, done or unconfirmed)."""

    kind: str
    execution_id: str
    state: str
    targets: list[dict[str, Any]]


class ConnectorTypes(_View):
    types: list[dict[str, Any]]
    other_sources: list[str]


class MemoryExportToken(_View):
    """A read-only memory statement for one user of one Agent (a credential: never cached)."""

    agent: str
    user_id: str
    header: str
    statement: str
    expires_at: float | int | str


@dataclass(frozen=True)
class Query:
    name: str
    schema: dict[str, Any]
    description: str
    location: Literal["query", "path", "header"] = "query"
    required: bool = False


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    operation_id: str
    summary: str
    permission: str
    answers: dict[int, type[BaseModel]]
    body: type[BaseModel] | None = None
    params: tuple[Query, ...] = ()
    stream: bool = False
    errors: tuple[int, ...] = field(default=(400, 401, 403, 404))


_ID = Query("execution_id", {"type": "string", "minLength": 1}, "the execution's id", "path", True)
_PROJECT = Query("project_id", {"type": "string", "minLength": 1}, "the namespace", "path", True)
_AGENT = Query("agent", {"type": "string", "minLength": 1}, "the Agent's name", "path", True)
_SESSION = Query("session_id", {"type": "string", "minLength": 1}, "the session", "path", True)
_LIMIT = Query("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}, "page size")
_CURSOR = Query("cursor", {"type": "string", "maxLength": 2048}, "next_cursor of the previous page")

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "post",
        "/invoke",
        "invoke",
        "Invoke an Agent on an input",
        "agents/invoke",
        {202: Accepted},
        InvokeRequest,
    ),
    Operation(
        "get",
        "/executions",
        "listExecutions",
        "List executions the caller may read, newest first",
        "agents get",
        {200: ExecutionPage},
        params=(
            Query(
                "status", {"type": "string", "enum": [s.value for s in ExecutionState]}, "only this status"
            ),
            Query("agent", {"type": "string"}, "only this Agent (NAMESPACE/NAME)"),
            Query("project", {"type": "string"}, "only this namespace"),
            _LIMIT,
            _CURSOR,
        ),
    ),
    Operation(
        "get",
        "/execution/{execution_id}",
        "getExecution",
        "One execution",
        "agents get",
        {200: Execution},
        params=(_ID,),
    ),
    Operation(
        "get",
        "/execution/{execution_id}/audit",
        "getAudit",
        "The execution's audit records",
        "agents get",
        {200: AuditRecords},
        params=(_ID,),
    ),
    Operation(
        "get",
        "/execution/{execution_id}/audit/verify",
        "verifyAudit",
        "Check the execution's audit hash chain and its signed head",
        "agents get",
        {200: AuditVerdict},
        params=(_ID,),
    ),
    Operation(
        "get",
        "/execution/{execution_id}/events",
        "followEvents",
        "The execution's events as Server-Sent Events (id, event, data: one JSON event)",
        "agents get",
        {},
        params=(
            _ID,
            Query("after", {"type": "integer", "minimum": 0}, "only events after this seq"),
            Query("Last-Event-ID", {"type": "string"}, "as `after`, from an EventSource", "header"),
        ),
        stream=True,
    ),
    Operation(
        "post",
        "/execution/{execution_id}/cancel",
        "cancelExecution",
        "Cancel an execution (durable; its runtimes are drained)",
        "agents/cancel",
        {200: Execution},
        params=(_ID,),
        errors=(401, 403, 404, 409),
    ),
    Operation(
        "post",
        "/execution/{execution_id}/interrupt",
        "interruptCall",
        "Interrupt the call at one step of a running execution",
        "agents/interrupt",
        {202: Delivery},
        InterruptBody,
        params=(_ID,),
        errors=(400, 401, 403, 404, 409, 413),
    ),
    Operation(
        "get",
        "/execution/{execution_id}/interrupts/{step}",
        "getInterrupt",
        "One interrupt and its outcome",
        "agents get",
        {200: Delivery},
        params=(_ID, Query("step", {"type": "integer", "minimum": 1}, "the step", "path", True)),
    ),
    Operation(
        "get",
        "/execution/{execution_id}/drain",
        "getDrain",
        "The drain a cancel started",
        "agents get",
        {200: Delivery},
        params=(_ID,),
    ),
    Operation(
        "post",
        "/resume/{execution_id}",
        "resumeExecution",
        "Decide a suspended execution's held call",
        "agents/approve",
        {202: Execution},
        WrappedResume,
        params=(_ID,),
        errors=(400, 401, 403, 404, 409, 413),
    ),
    Operation(
        "post",
        "/api/v1/projects/{project_id}/executions/{execution_id}/resume",
        "resumeInProject",
        "Decide a suspended execution's held call (the flat body)",
        "agents/approve",
        {202: Execution},
        ReviewDecision,
        params=(_PROJECT, _ID),
        errors=(400, 401, 403, 404, 409, 413),
    ),
    Operation(
        "get",
        "/api/v1/projects/{project_id}/reviews",
        "listReviews",
        "The executions of a namespace waiting for a reviewer",
        "agents get",
        {200: ReviewPage},
        params=(_PROJECT, _LIMIT, _CURSOR),
    ),
    Operation(
        "post",
        "/api/v1/projects/{project_id}/agents/{agent}/memory-export-token",
        "memoryExportToken",
        "A read-only memory statement for one user of an Agent",
        "agents/memoryexport",
        {200: MemoryExportToken},
        MemoryExportRequest,
        params=(_PROJECT, _AGENT),
        errors=(400, 401, 403, 404, 409),
    ),
    Operation(
        "get",
        "/api/v1/projects/{project_id}/agents/{agent}/sessions",
        "listSessions",
        "A LangGraph Agent's sessions that have a thread",
        "agents get",
        {200: Sessions},
        params=(_PROJECT, _AGENT),
        errors=(401, 403, 404),
    ),
    Operation(
        "get",
        "/api/v1/projects/{project_id}/agents/{agent}/sessions/{session_id}/messages",
        "listSessionMessages",
        "A session's messages",
        "agents get",
        {200: SessionMessages},
        params=(_PROJECT, _AGENT, _SESSION),
        errors=(401, 403, 404),
    ),
    Operation(
        "get",
        "/api/v1/projects/{project_id}/agents/{agent}/sessions/{session_id}/state",
        "getThreadState",
        "A session's thread state (LangGraph get_state)",
        "agents get",
        {200: ThreadState},
        params=(_PROJECT, _AGENT, _SESSION),
        errors=(401, 403, 404, 409),
    ),
    Operation(
        "post",
        "/api/v1/projects/{project_id}/agents/{agent}/sessions/{session_id}/state",
        "updateThreadState",
        "Write a session's thread state as a node would (LangGraph update_state)",
        "agents/approve",
        {200: ThreadState},
        ThreadUpdate,
        params=(_PROJECT, _AGENT, _SESSION),
        errors=(400, 401, 403, 404, 409, 413),
    ),
    Operation(
        "post",
        "/api/v1/projects/{project_id}/agents/{agent}/sessions/{session_id}/fork",
        "forkSession",
        "Fork a session at a step of one of its finished executions into a new session (LG-18)",
        "agents/invoke",
        {202: Execution},
        ForkRequest,
        params=(_PROJECT, _AGENT, _SESSION),
        errors=(400, 401, 403, 404, 409, 413),
    ),
    Operation(
        "post",
        OE_CONNECTOR_TEST_PATH,
        "testConnector",
        "Run one connector's test_connection in the Agent's Tool Pod",
        "agents/invoke",
        {200: ConnectorTestAnswer},
        params=(
            _PROJECT,
            _AGENT,
            Query("connector", {"type": "string", "minLength": 1}, "the connector's name", "path", True),
        ),
        errors=(401, 403, 404, 502),
    ),
    Operation(
        "post",
        OE_KNOWLEDGE_PATH,
        "addKnowledgeDocument",
        "Add or replace a document in the Agent's knowledge base (forwarded to its Memory server)",
        "agents update",
        {201: IngestAnswer, 200: IngestAnswer},
        IngestBody,
        params=(_PROJECT, _AGENT),
        errors=(400, 401, 403, 404, 409, 413, 502),
    ),
    Operation(
        "get",
        OE_KNOWLEDGE_PATH,
        "listKnowledgeDocuments",
        "The documents in the Agent's knowledge base",
        "agents get",
        {200: SourcesAnswer},
        params=(
            _PROJECT,
            _AGENT,
            Query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "page size"),
            Query("offset", {"type": "integer", "minimum": 0}, "documents to skip"),
        ),
        errors=(400, 401, 403, 404, 409, 502),
    ),
    Operation(
        "delete",
        OE_KNOWLEDGE_PATH,
        "forgetKnowledgeDocument",
        "Remove a document and its chunks from the Agent's knowledge base",
        "agents update",
        {200: KnowledgeRemoved},
        params=(
            _PROJECT,
            _AGENT,
            Query("source", {"type": "string", "minLength": 1}, "the document's source", "query", True),
        ),
        errors=(400, 401, 403, 404, 409, 502),
    ),
    Operation(
        "get",
        CONNECTOR_TYPES_PATH,
        "listConnectorTypes",
        "The built-in connector types",
        "authenticated",
        {200: ConnectorTypes},
        errors=(401,),
    ),
)

_ERRORS: dict[int, tuple[type[BaseModel], str]] = {
    400: (BadRequest, "a bad field, named"),
    401: (Status, "no token, or one the cluster does not accept"),
    403: (Status, "the caller may not: the Status names the rule to ask for"),
    404: (ErrorAnswer, "no such execution, Agent or connector (or not readable by the caller)"),
    409: (ErrorAnswer, "the execution is not in a state that allows this"),
    413: (BadRequest, "the body is too large"),
    502: (ErrorAnswer, "the Agent's Tool Pod (or, for knowledge, its Memory server) could not be asked"),
}


def _json(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}}


def openapi_document() -> dict[str, Any]:
    """The document: every client operation, its body, parameters and answers, and the schemas."""
    request_models = {op.body for op in OPERATIONS if op.body is not None}
    answer_models = {model for op in OPERATIONS for model in op.answers.values()}
    answer_models |= {model for model, _ in _ERRORS.values()}
    pairs = [(model, "validation") for model in sorted(request_models, key=lambda m: m.__name__)]
    pairs += [(model, "serialization") for model in sorted(answer_models, key=lambda m: m.__name__)]
    _, schemas = models_json_schema(pairs, ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        responses: dict[str, Any] = {}
        for status, model in op.answers.items():
            responses[str(status)] = {"description": model.__doc__ or "ok", "content": _json(model)}
        if op.stream:
            responses["200"] = {
                "description": "Server-Sent Events, one JSON event a `data:` line",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        for status in op.errors:
            model, why = _ERRORS[status]
            responses[str(status)] = {"description": why, "content": _json(model)}
        entry: dict[str, Any] = {
            "operationId": op.operation_id,
            "summary": op.summary,
            "description": f"Needs: {op.permission}.",
            "responses": responses,
        }
        if op.params:
            entry["parameters"] = [
                {
                    "name": q.name,
                    "in": q.location,
                    "required": q.required or q.location == "path",
                    "description": q.description,
                    "schema": q.schema,
                }
                for q in op.params
            ]
        if op.body is not None:
            entry["requestBody"] = {"required": True, "content": _json(op.body)}
        paths.setdefault(op.path, {})[op.method] = entry
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Agent Engine Orchestration Engine: client API",
            "version": "1",
            "description": "Invoke Agents, follow and review their executions. Authenticate with a bearer "
            "token the cluster accepts for the OE's audience (or the development token).",
        },
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def openapi_json() -> str:
    """The document as the checked-in file holds it (sorted keys, two-space indent, final newline)."""
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(openapi_json(), end="")
