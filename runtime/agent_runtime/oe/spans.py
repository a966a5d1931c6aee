"""The OE's spans: one per execution, one per run, one per step (B-18), over `agent_runtime.tracing`.

The execution's span is opened at `/invoke` (under the client's traceparent, if any) and its context is kept
on the execution (`trace_context`), so that every run, the first and each resume, is a child of it: one
execution is one trace even when a human decides a day later on another replica. A resumed run also links
to the resume request's span. A run's span stays open until the run's callback (or failure, or cancel)
reaches this OE; one this OE never sees end (another replica took the callback) is ended when it is pushed
out of the bounded table of open runs.

Step spans carry the GenAI semantic conventions' attributes (`gen_ai.operation.name`,
`gen_ai.request.model`, `gen_ai.usage.*`) and the OE's own (tool, route, decision, from_cache, error
category); never arguments or results unless `AGENTIC_TRACING_ARGUMENTS` is on (then redacted as the audit).
"""

from __future__ import annotations

import contextlib
import json
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from agent_runtime import tracing
from agent_runtime.oe.audit import audit_value
from agent_runtime.oe.usage import Usage

_MAX_OPEN_RUNS = 4096
_open_runs: OrderedDict[str, Span] = OrderedDict()


def execution_started(*, execution_id: str, agent: str) -> str | None:
    """Open (and at once end) the execution's span under the current context; its traceparent to keep."""
    if not tracing.enabled():
        return None
    span = tracing.tracer().start_span(
        f"execution {agent}",
        kind=SpanKind.INTERNAL,
        attributes={"agent.execution.id": execution_id, "agent.name": agent},
    )
    span.end()  # the runs under it carry the durations; its context is all they need
    return tracing.traceparent_of(span)


@contextlib.contextmanager
def run(
    *, execution_id: str, agent: str, trace_context: str | None, number: int, resume: bool
) -> Iterator[None]:
    """The current context is the run's span (child of the execution's) while the AER is handed the run."""
    if not tracing.enabled():
        yield
        return
    parent = tracing.context_of(trace_context)
    links = tracing.link_to_current() if resume else []
    span = tracing.tracer().start_span(
        f"run {number}" + (" (resume)" if resume else ""),
        context=parent,
        links=links,
        attributes={
            "agent.execution.id": execution_id,
            "agent.name": agent,
            "agent.run": number,
            "agent.resume": resume,
        },
    )
    _remember(execution_id, span)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        otel_context.detach(token)


def run_ended(execution_id: str, *, status: str, error_category: str | None = None) -> None:
    """End the execution's open run span, if this OE holds it."""
    span = _open_runs.pop(execution_id, None)
    if span is None:
        return
    span.set_attribute("agent.run.status", status)
    if error_category:
        span.set_attribute("error.type", error_category)
        span.set_status(Status(StatusCode.ERROR, error_category))
    span.end()


def _remember(execution_id: str, span: Span) -> None:
    earlier = _open_runs.pop(execution_id, None)
    if earlier is not None:
        earlier.end()
    _open_runs[execution_id] = span
    while len(_open_runs) > _MAX_OPEN_RUNS:
        _, oldest = _open_runs.popitem(last=False)
        oldest.end()


@contextlib.contextmanager
def step(*, step: int, tool: str, llm_id: str | None, is_llm: bool) -> Iterator[None]:
    """A span for one governed call, current while the OE decides and routes it."""
    if not tracing.enabled():
        yield
        return
    operation = "chat" if is_llm else "execute_tool"
    # The execution's id is on its execution and run spans (one trace is one execution), a tool's name once
    # as `gen_ai.tool.name`: each attribute is encoded and exported per step, so none is said twice.
    attributes: dict[str, Any] = {"agent.step": step, "gen_ai.operation.name": operation}
    attributes["agent.tool" if is_llm else "gen_ai.tool.name"] = tool  # a model step's llm id: its name
    name = f"{operation} {llm_id or 'default'}" if is_llm else f"{operation} {tool}"
    # start_span and attach by hand: the SDK's start_as_current_span wraps this in two more context managers.
    span = tracing.light_tracer().start_span(name, attributes=attributes)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield
    except BaseException as exc:  # the type only: an exception's message may quote a call's arguments
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        otel_context.detach(token)
        span.end()


def annotate_step(
    *,
    decision: str,
    route: str | None,
    from_cache: bool,
    status: str | None,
    error_category: str | None,
    model: str | None = None,
    usage: Usage | None = None,
    cost: float | None = None,
    arguments: Any = None,
    secrets: tuple[str, ...] = (),
) -> None:
    """What the OE decided about the current step's call, on its span."""
    if not tracing.enabled():
        return
    attributes: dict[str, Any] = {
        "agent.decision": decision,
        "agent.route": route,
        "agent.from_cache": from_cache,
        "agent.status": status,
        # The model that answered; the Tool Pod's span under this one names it as the response's too.
        "gen_ai.request.model": model,
    }
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
        if usage.cached_tokens:  # absent means none: each attribute is encoded and exported per step
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
    if cost is not None:
        attributes["agent.usage.cost"] = cost
    if arguments is not None and tracing.arguments_enabled():
        redacted = audit_value(arguments, secrets=secrets)  # only here: off, nothing is redacted twice
        attributes["agent.arguments"] = json.dumps(redacted, default=str)[:4096]
    tracing.set_attributes(attributes)
    if error_category:
        tracing.mark_error(error_category)
