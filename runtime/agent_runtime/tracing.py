"""OpenTelemetry traces for every component: setup from the environment, W3C propagation, span exporters.

One governed turn is one trace: the client's `traceparent` (if any) -> the OE's execution and run spans ->
the AER's request -> the OE's step span -> the Tool Pod's request -> the provider's HTTP call (and the
Memory server's). Every hop carries W3C `traceparent`: servers read it in `TracingMiddleware`, the
platform's aiohttp calls write it with `inject()`, a provider's call (connectors.async_client.send) is a
client span of its own (`start_client_span`), and httpx clients send it through `httpx_event_hooks()`.

Which exporters run (B-18): `AGENTIC_TRACING_EXPORTER`, a comma-separated list of `otlp`, `jsonl`, `mongodb`
or `none`; unset, `otlp` when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set,
otherwise none. With none nothing is installed: every hook checks `enabled()` first, so off costs a
function call. `jsonl` writes one file per process under `AGENTIC_TRACING_JSONL_DIR` (default
`/tmp/traces`), `mongodb` the collection `AGENTIC_TRACING_MONGODB_COLLECTION` (default `traces`) of the
database in `MONGODB_URI`. The other `OTEL_*` variables (service name, batch delay, headers) keep their
standard meaning.

Spans carry names, routes, decisions, categories and token counts, never arguments, results or URLs' query
strings: the OE adds arguments (redacted as its audit is) only when `AGENTIC_TRACING_ARGUMENTS` is on.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.trace.span import TraceState

if TYPE_CHECKING:
    from agent_runtime.light_spans import LightTracer

logger = logging.getLogger(__name__)

EXPORTER_ENV = "AGENTIC_TRACING_EXPORTER"
JSONL_DIR_ENV = "AGENTIC_TRACING_JSONL_DIR"
MONGODB_COLLECTION_ENV = "AGENTIC_TRACING_MONGODB_COLLECTION"
ARGUMENTS_ENV = "AGENTIC_TRACING_ARGUMENTS"
MONGODB_URI_ENV = "MONGODB_URI"
# The traces' own database, when it is not the component's (MONGODB_URI, the fallback).
TRACING_MONGODB_URI_ENV = "AGENTIC_TRACING_MONGODB_URI"
EXPORTERS = ("otlp", "jsonl", "mongodb")
TRACER_NAME = "agent_runtime"
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

_state: dict[str, Any] = {"enabled": False, "arguments": False}

# The W3C trace context alone unless `OTEL_PROPAGATORS` names others: the SDK's default adds baggage, which
# the platform never reads and which doubles the cost of every inject and extract (setup_tracing decides).
_W3C = TraceContextTextMapPropagator()
_propagator: TextMapPropagator = _W3C


class TracingConfigError(ValueError):
    """A tracing setting that cannot be used; the message names the variable and the fix."""


def enabled() -> bool:
    """True once `setup_tracing` installed at least one exporter in this process."""
    return bool(_state["enabled"])


def arguments_enabled() -> bool:
    """True when a setting asks for (redacted) arguments as span attributes."""
    return bool(_state["arguments"])


def selected_exporters(env: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters the environment asks for (pure; see the module docstring)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    raw = env.get(EXPORTER_ENV, "").strip().lower()
    if not raw:
        otlp = (
            env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
            or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        )
        return ("otlp",) if otlp else ()
    names = tuple(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))
    if names == ("none",):
        return ()
    unknown = [name for name in names if name not in EXPORTERS]
    if unknown:
        raise TracingConfigError(
            f"{EXPORTER_ENV}: unknown exporter {unknown[0]!r}; use a comma-separated list of "
            f"{', '.join(EXPORTERS)}, or none"
        )
    if "mongodb" in names and not _mongodb_uri(env):
        raise TracingConfigError(
            f"{EXPORTER_ENV}: the mongodb exporter needs {TRACING_MONGODB_URI_ENV} or {MONGODB_URI_ENV}; "
            "set one or drop mongodb"
        )
    return names


def setup_tracing(component: str, env: Mapping[str, str] | None = None) -> bool:
    """Install a tracer provider with the exporters `env` asks for; False (and nothing installed) for none."""
    env = os.environ if env is None else env
    names = selected_exporters(env)
    _state["arguments"] = env.get(ARGUMENTS_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    if not names:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    global _propagator
    _propagator = propagate.get_global_textmap() if env.get("OTEL_PROPAGATORS", "").strip() else _W3C
    service = env.get("OTEL_SERVICE_NAME", "").strip() or f"agent-engine-{component}"
    resource = Resource.create({"service.name": service, "agent.component": component})
    provider = TracerProvider(resource=resource)
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, component=component, env=env)))
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)
    _state["enabled"] = True
    logger.info("tracing on (%s): service %s", ", ".join(names), service)
    return True


def _exporter(name: str, *, component: str, env: Mapping[str, str]) -> Any:
    if name == "otlp":
        from agent_runtime.otlp_spans import OTLPHttpSpanExporter

        return OTLPHttpSpanExporter()  # reads the standard OTEL_EXPORTER_OTLP_* variables itself
    if name == "jsonl":
        directory = Path(env.get(JSONL_DIR_ENV, "").strip() or "/tmp/traces")  # noqa: S108 (the emptyDir)
        return JsonlSpanExporter(directory / f"{component}-{os.getpid()}.jsonl")
    collection = env.get(MONGODB_COLLECTION_ENV, "").strip() or "traces"
    return MongoSpanExporter(_mongodb_uri(env), collection=collection)


def _mongodb_uri(env: Mapping[str, str]) -> str:
    return env.get(TRACING_MONGODB_URI_ENV, "").strip() or env.get(MONGODB_URI_ENV, "").strip()


def tracer() -> trace.Tracer:
    """The process's tracer, made once (the SDK's get_tracer is not cheap enough for every request)."""
    cached = _state.get("tracer")
    if cached is None:
        cached = _state["tracer"] = trace.get_tracer(TRACER_NAME)
    return cached  # type: ignore[no-any-return]


def light_tracer() -> LightTracer:
    """The tracer of the hot paths' spans (a step, a model call, a provider request): `light_spans`."""
    cached = _state.get("light_tracer")
    if cached is None:
        from agent_runtime.light_spans import LightTracer  # the SDK's: imported once tracing is on

        cached = _state["light_tracer"] = LightTracer(tracer())  # type: ignore[arg-type]
    return cached  # type: ignore[no-any-return]


def inject(headers: MutableMapping[str, str]) -> None:
    """Write the current span's `traceparent` (and `tracestate`) into outgoing headers."""
    if _state["enabled"]:
        if _propagator is _W3C:
            _write_w3c(trace.get_current_span().get_span_context(), headers)
        else:
            _propagator.inject(headers)


def extract(headers: Mapping[str, str]) -> otel_context.Context:
    return _propagator.extract(headers)


def current_traceparent() -> str | None:
    """`get_current_trace_context()` of the seed: the current span as a W3C traceparent, or None."""
    if not _state["enabled"]:
        return None
    return traceparent_of(trace.get_current_span())


def current_ids() -> tuple[str | None, str | None]:
    """The current trace and span ids (hex), for a log record; (None, None) with tracing off."""
    if not _state["enabled"]:
        return None, None
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None, None
    return format(span_context.trace_id, "032x"), format(span_context.span_id, "016x")


def traceparent_of(span: trace.Span) -> str | None:
    """The W3C traceparent naming `span`."""
    span_context = span.get_span_context()
    return _traceparent(span_context) if span_context.is_valid else None


def context_of(traceparent: str | None) -> otel_context.Context | None:
    """The context a stored traceparent names (the execution's span), or None."""
    return parse_w3c(traceparent, None) if traceparent else None


# W3C trace context by hand: the SDK's propagator goes through a getter, a list per header and a Context
# built from the current one on every request, which cost several times the parsing itself (issue 33).
# Same rules: a version other than ff (00 has exactly four fields), lowercase hex, ids not all zeros, a
# tracestate over 512 characters ignored.
_TRACEPARENT_FORMAT = re.compile(r"\s*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?\s*")
_TRACESTATE_MAX = 512


def parse_w3c(traceparent: str, tracestate: str | None) -> otel_context.Context | None:
    """The remote span context a `traceparent` (and `tracestate`) header names, or None when invalid."""
    match = _TRACEPARENT_FORMAT.fullmatch(traceparent)
    if match is None:
        return None
    version, trace_hex, span_hex, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest):
        return None
    trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
    if not trace_id or not span_id:
        return None
    state = (
        TraceState.from_header([tracestate]) if tracestate and len(tracestate) <= _TRACESTATE_MAX else None
    )
    span_context = SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(int(flags, 16)), trace_state=state
    )
    return trace.set_span_in_context(NonRecordingSpan(span_context), _EMPTY)


_EMPTY = otel_context.Context()


def _traceparent(span_context: SpanContext) -> str:
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}"


def _write_w3c(span_context: SpanContext, headers: MutableMapping[str, str]) -> None:
    if span_context.is_valid:
        headers[TRACEPARENT] = _traceparent(span_context)
        if span_context.trace_state:
            headers[TRACESTATE] = span_context.trace_state.to_header()


def link_to_current() -> list[Link]:
    """A link to the current span (a resume's request), for a span parented elsewhere."""
    span_context = trace.get_current_span().get_span_context()
    return [Link(span_context)] if span_context.is_valid else []


def set_attributes(attributes: Mapping[str, Any]) -> None:
    """Set attributes on the current span (None values skipped); a no-op when tracing is off."""
    if not _state["enabled"]:
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({key: value for key, value in attributes.items() if value is not None})


def mark_error(category: str) -> None:
    if _state["enabled"]:
        span = trace.get_current_span()
        span.set_attribute("error.type", category)
        span.set_status(Status(StatusCode.ERROR, category))


# -- HTTP clients -----------------------------------------------------------------------------------------


# A model call's span waiting for its provider request (`model_call_span`): a one-element list, so that the
# request takes it once even from a task the call started (a task copies the context, not the list).
_WAITING_CALL_SPAN: ContextVar[list[trace.Span] | None] = ContextVar(
    "agentic_waiting_call_span", default=None
)


@contextlib.contextmanager
def model_call_span(name: str, *, attributes: Mapping[str, Any]) -> Iterator[trace.Span]:
    """The current span, a client span, while one model call runs; it is also its provider request's span.

    The GenAI conventions' inference span is the client span of the call to the provider (server address
    and port included): the first request sent under it (`start_client_span`) takes its attributes instead
    of a span of its own, which would say the same again and cost the turn a span. A retry's request is a
    span of its own under it.
    """
    span = light_tracer().start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
    context_token = otel_context.attach(trace.set_span_in_context(span))
    token = _WAITING_CALL_SPAN.set([span])
    try:
        yield span
    except BaseException as exc:  # the type only: an exception's message may quote a call's arguments
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        _WAITING_CALL_SPAN.reset(token)
        otel_context.detach(context_token)
        span.end()


def start_client_span(method: str, *, host: str, port: int, path: str) -> tuple[trace.Span, bool]:
    """The span of one outgoing call to a provider, naming the method and host, never the query string, and
    whether it is the caller's to end: a new client span, or the waiting model call's (`model_call_span`),
    which its owner ends. The caller injects its context into the request (`inject_span`) and closes it
    (`end_client_span`).

    Called by hand around the request rather than through aiohttp's TraceConfig: its signals cost more per
    request than the span itself. The platform's own hops (OE -> AER, AER -> OE) send only the traceparent
    (`inject`): the server span on the other side times them, and every span costs the turn.
    """
    attributes = {
        "http.request.method": method,
        "server.address": host,
        "server.port": port,
        "url.path": path,
    }
    waiting = _WAITING_CALL_SPAN.get()
    if waiting:
        span = waiting.pop()
        span.set_attributes(attributes)
        return span, False
    return light_tracer().start_span(f"{method} {host}", kind=SpanKind.CLIENT, attributes=attributes), True


def inject_span(span: trace.Span, headers: MutableMapping[str, str]) -> None:
    """Write `span`'s traceparent into outgoing headers."""
    if _propagator is _W3C:
        _write_w3c(span.get_span_context(), headers)
    else:
        _propagator.inject(headers, context=trace.set_span_in_context(span))


def end_client_span(
    span: trace.Span, *, owned: bool, status: int | None = None, error: BaseException | None = None
) -> None:
    """Record the response's status code, or the type of the error that stopped the call, and end the span
    if it is the caller's."""
    if error is not None:
        span.set_attribute("error.type", type(error).__name__)
        span.set_status(Status(StatusCode.ERROR))
    elif status is not None:
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))
    if owned:
        span.end()


def httpx_event_hooks(*, asynchronous: bool) -> dict[str, list[Any]]:
    """For `httpx.AsyncClient(event_hooks=...)` (asynchronous) or `httpx.Client`: the traceparent sent."""
    if not _state["enabled"]:
        return {}

    def sync_hook(request: Any) -> None:
        inject(request.headers)

    async def async_hook(request: Any) -> None:
        inject(request.headers)

    return {"request": [async_hook if asynchronous else sync_hook]}


# -- servers ----------------------------------------------------------------------------------------------


# Routes whose request is already a span of its own (the OE's step span, the Tool Pod's model span) or is
# timed by one on the caller's side (the Tool Pod's `/execute`: the OE's step span routes it and ends when it
# answers, and a provider's call from the tool is a client span under it): the middleware only makes the
# caller's context current there, since every span costs the turn.
CONTEXT_ONLY = {
    "oe": frozenset({"/tool/execute", "/tool/result", "/executor/callback"}),
    "tool": frozenset({"/invoke_llm", "/execute"}),
}


class TracingMiddleware:
    """ASGI: one server span per HTTP request, under the caller's `traceparent` (only the caller's context,
    no span, on the `CONTEXT_ONLY` routes); a read with no caller's trace starts none; probes are not
    traced."""

    _UNTRACED = frozenset({"/healthz", "/readyz", "/metrics"})

    def __init__(self, app: Any, *, component: str) -> None:
        self.app = app
        self.component = component
        self._context_only = CONTEXT_ONLY.get(component, frozenset())

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in self._UNTRACED:
            await self.app(scope, receive, send)
            return
        parent = _caller_context(scope.get("headers", ()))
        method = scope.get("method", "GET")
        path = scope.get("path", "")
        if path in self._context_only or (parent is None and method in _READS):
            if parent is None:  # no caller's trace: nothing to make current (a read starts no trace)
                await self.app(scope, receive, send)
                return
            token = otel_context.attach(parent)
            try:
                await self.app(scope, receive, send)
            finally:
                otel_context.detach(token)
            return
        status: dict[str, int] = {}

        async def send_status(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        with tracer().start_as_current_span(
            f"{self.component} {method} {_route_of(path)}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": path},  # the component: the resource's
        ) as span:
            await self.app(scope, receive, send_status)
            code = status.get("code", 500)
            span.set_attribute("http.response.status_code", code)
            if code >= 500:
                span.set_status(Status(StatusCode.ERROR))


# A read (a client polling an execution's status, a console listing) under no caller's trace would be a trace
# of one span each time: reads get a span only inside a caller's trace.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def _caller_context(raw: Any) -> otel_context.Context | None:
    """The caller's context from the W3C headers alone (no other header is decoded), or None without one."""
    if _propagator is not _W3C:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw}
        return _propagator.extract(headers)
    traceparent = tracestate = None
    for key, value in raw:
        if key == b"traceparent":
            traceparent = value.decode("latin-1")
        elif key == b"tracestate":  # several fields are one list (RFC 9110, 5.3)
            tracestate = (
                value.decode("latin-1") if tracestate is None else f"{tracestate},{value.decode('latin-1')}"
            )
    return parse_w3c(traceparent, tracestate) if traceparent is not None else None


def instrument(app: Any, *, component: str) -> Any:
    """The app under `TracingMiddleware` when tracing is on; the app itself otherwise."""
    return TracingMiddleware(app, component=component) if _state["enabled"] else app


def _route_of(path: str) -> str:
    """A bounded span name: identifiers (hex ids, numbers) in a path become `{id}`."""
    parts = []
    for part in path.split("/"):
        looks_like_id = len(part) >= 16 and all(c in "0123456789abcdef-" for c in part.lower())
        parts.append("{id}" if looks_like_id or part.isdigit() else part)
    return "/".join(parts)


# -- exporters --------------------------------------------------------------------------------------------


class JsonlSpanExporter:
    """One JSON object per finished span, one line each, in one file per process (B-18)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        lines = "".join(_compact(span.to_json()) + "\n" for span in spans)
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _compact(text: str) -> str:
    return json.dumps(json.loads(text), separators=(",", ":"))


def span_document(span_json: str) -> dict[str, Any]:
    """A finished span (the SDK's JSON) as a MongoDB document: every `attributes` map (the span's, its
    events', links' and resource's) as a list of `{key, value}`, since attribute names hold dots, which a
    document's field names may not (FerretDB refuses them; MongoDB reads them as paths)."""
    return dict(_without_dotted_keys(json.loads(span_json)))


def _without_dotted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: (
                [{"key": k, "value": _without_dotted_keys(v)} for k, v in item.items()]
                if key == "attributes" and isinstance(item, dict)
                else _without_dotted_keys(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_without_dotted_keys(item) for item in value]
    return value


class MongoSpanExporter:
    """Finished spans as documents of a MongoDB collection (B-18); the batch processor's thread writes."""

    def __init__(self, uri: str, *, collection: str) -> None:
        from pymongo import MongoClient

        self._client: Any = MongoClient(uri, serverSelectionTimeoutMS=5000)
        database = self._client.get_default_database(default="agent_engine")
        self._collection = database[collection]

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        documents = [span_document(span.to_json()) for span in spans]
        try:
            if documents:
                self._collection.insert_many(documents, ordered=False)
        except Exception as exc:  # a down database must not take the component with it
            logger.warning("traces not written to MongoDB: %s", type(exc).__name__)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._client.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
