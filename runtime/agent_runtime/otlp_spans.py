"""Finished spans as an OTLP `ExportTraceServiceRequest` in protobuf, written straight to bytes (issue 33).

The SDK's exporter builds a protobuf message object per span, attribute and value and then serializes them:
about 50 us a span, paid by every component's export thread on the cores the turn runs on. Writing the
same wire format directly costs a fraction of that. The bytes decode to the message the SDK would build
(tests/unit/test_otlp_spans.py compares them span for span); only the encoding differs. The resource and the
instrumentation scope, the same for every span of a process, are encoded once.

`OTLPHttpSpanExporter` is the SDK's OTLP/HTTP exporter (its endpoint, headers, timeout, compression and
retries from the standard `OTEL_EXPORTER_OTLP_*` variables) with this encoder in place of its own.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext

logger = logging.getLogger(__name__)

_DOUBLE = struct.Struct("<d").pack
_FIXED64 = struct.Struct("<Q").pack
_FIXED32 = struct.Struct("<I").pack
# Span.flags: bit 8 says whether the parent's remoteness is known, bit 9 that it is remote (trace.proto).
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64: two's complement, ten bytes
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes, message)."""
    size = len(payload)
    return _TAGS[number] + (_SMALL[size] if size < 0x80 else _varint(size)) + payload


_TAGS = {number: _varint(number << 3 | 2) for number in range(1, 17)}
_SMALL = [bytes((n,)) for n in range(0x80)]


def _any_value(value: Any) -> bytes:
    """common.proto's AnyValue: a oneof, so a zero or empty value is still written."""
    if value is None:
        return b""
    if value is True:
        return b"\x10\x01"
    if value is False:
        return b"\x10\x00"
    if isinstance(value, str):
        return _field(1, value.encode())
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE(value)
    if isinstance(value, bytes):
        return _field(7, value)
    if isinstance(value, Sequence):
        return _field(5, b"".join(_field(1, _any_value(item)) for item in value))
    if isinstance(value, Mapping):
        return _field(6, b"".join(_field(1, _key_value(str(k), v)) for k, v in value.items()))
    raise TypeError(f"an attribute value of type {type(value).__name__} has no OTLP form")


def _key_value(key: str, value: Any) -> bytes:
    return _field(1, key.encode()) + _field(2, _any_value(value))


# A step's attributes are mostly the same few names with the same few values (a decision, a route, a step
# number): their encodings are kept, up to a bound, and the cache starts over when full. Only str, bool and
# int values of a bounded size: a float's -0.0 equals 0.0 but encodes otherwise.
_KNOWN_PAIRS: dict[tuple[int, str, type, Any], bytes] = {}
_KNOWN_PAIRS_MAX = 4096
_CACHED_TYPES = (str, bool, int)


def _attribute(number: int, key: str, value: Any) -> bytes:
    kind = type(value)
    if kind not in _CACHED_TYPES or (kind is str and len(value) > 64):
        return _field(number, _key_value(key, value))
    pair = (number, key, kind, value)  # the field number too: an event's attributes are field 3
    known = _KNOWN_PAIRS.get(pair)
    if known is None:
        if len(_KNOWN_PAIRS) >= _KNOWN_PAIRS_MAX:
            _KNOWN_PAIRS.clear()
        known = _KNOWN_PAIRS[pair] = _field(number, _key_value(key, value))
    return known


def _attributes(number: int, attributes: Mapping[str, Any] | None) -> bytes:
    if not attributes:
        return b""
    out = []
    for key, value in attributes.items():
        try:
            out.append(_attribute(number, key, value))
        except TypeError:
            logger.warning("span attribute %s left out: its value has no OTLP form", key)
    return b"".join(out)


def _flags(parent: SpanContext | None) -> bytes:
    flags = _HAS_IS_REMOTE | (_IS_REMOTE if parent is not None and parent.is_remote else 0)
    return b"\x85\x01" + _FIXED32(flags)  # field 16, fixed32


def _span(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    parts = [
        b"\x0a\x10" + context.trace_id.to_bytes(16, "big"),
        b"\x12\x08" + context.span_id.to_bytes(8, "big"),
    ]
    if context.trace_state:
        parts.append(_field(3, ",".join(f"{k}={v}" for k, v in context.trace_state.items()).encode()))
    if span.parent is not None:
        parts.append(b"\x22\x08" + span.parent.span_id.to_bytes(8, "big"))
    parts.append(_field(5, span.name.encode()))
    parts.append(b"\x30" + _varint(span.kind.value + 1))  # the SDK's INTERNAL is 0, OTLP's 1
    if span.start_time:
        parts.append(b"\x39" + _FIXED64(span.start_time))
    if span.end_time:
        parts.append(b"\x41" + _FIXED64(span.end_time))
    parts.append(_attributes(9, span.attributes))
    if span.dropped_attributes:
        parts.append(b"\x50" + _varint(span.dropped_attributes))
    for event in span.events:
        event_parts = [b"\x09" + _FIXED64(event.timestamp)] if event.timestamp else []
        event_parts += [_field(2, event.name.encode()), _attributes(3, event.attributes)]
        if event.dropped_attributes:
            event_parts.append(b"\x20" + _varint(event.dropped_attributes))
        parts.append(_field(11, b"".join(event_parts)))
    if span.dropped_events:
        parts.append(b"\x60" + _varint(span.dropped_events))
    for link in span.links:
        link_parts = [
            b"\x0a\x10" + link.context.trace_id.to_bytes(16, "big"),
            b"\x12\x08" + link.context.span_id.to_bytes(8, "big"),
            _attributes(4, link.attributes),
        ]
        if link.dropped_attributes:
            link_parts.append(b"\x28" + _varint(link.dropped_attributes))
        flags = _HAS_IS_REMOTE | (_IS_REMOTE if link.context.is_remote else 0)
        link_parts.append(b"\x35" + _FIXED32(flags))
        parts.append(_field(13, b"".join(link_parts)))
    if span.dropped_links:
        parts.append(b"\x70" + _varint(span.dropped_links))
    status = span.status
    status_parts = b""
    if status.description:
        status_parts += _field(2, status.description.encode())
    if status.status_code.value:
        status_parts += b"\x18" + _varint(status.status_code.value)
    parts.append(_field(15, status_parts))
    parts.append(_flags(span.parent))
    return _field(2, b"".join(parts))  # ScopeSpans.spans


class SpanEncoder:
    """Encodes batches of one process's spans; remembers each resource's and scope's encoding."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, bytes]] = {}  # id -> (the object, kept so its id stays its, bytes)

    def _once(self, thing: Any, encode: Any) -> bytes:
        known = self._known.get(id(thing))
        if known is None or known[0] is not thing:
            known = self._known[id(thing)] = (thing, encode(thing))
        return known[1]

    def encode(self, spans: Sequence[ReadableSpan]) -> bytes:
        """An `ExportTraceServiceRequest`: spans grouped by resource, then instrumentation scope."""
        # Grouped as the SDK groups them, by equal resource and scope; found by identity first, since one
        # process's spans share both objects and comparing them (or hashing a resource) is what costs.
        grouped: list[tuple[Any, list[tuple[Any, list[bytes]]]]] = []
        for span in spans:
            resource, scope = span.resource, span.instrumentation_scope
            scopes = _group(grouped, resource)
            _group(scopes, scope).append(_span(span))
        out = []
        for resource, scopes in grouped:
            body = [self._once(resource, _resource)]
            for scope, encoded in scopes:
                scope_spans = [self._once(scope, _scope), *encoded]
                if scope is not None and scope.schema_url:
                    scope_spans.append(_field(3, scope.schema_url.encode()))
                body.append(_field(2, b"".join(scope_spans)))
            if resource.schema_url:
                body.append(_field(3, resource.schema_url.encode()))
            out.append(_field(1, b"".join(body)))
        return b"".join(out)


def _group(groups: list[tuple[Any, Any]], key: Any) -> Any:
    """The members kept under `key` (the same object, else an equal one), a new list if none yet."""
    for known, members in groups:
        if known is key:
            return members
    for known, members in groups:
        if known == key:
            return members
    members: list[Any] = []
    groups.append((key, members))
    return members


def _resource(resource: Any) -> bytes:
    return _field(1, _attributes(1, resource.attributes))  # ResourceSpans.resource


def _scope(scope: Any) -> bytes:
    if scope is None:
        return _field(1, b"")
    body = _field(1, scope.name.encode()) if scope.name else b""
    if scope.version:
        body += _field(2, scope.version.encode())
    body += _attributes(3, scope.attributes)
    return _field(1, body)  # ScopeSpans.scope


class OTLPHttpSpanExporter(OTLPSpanExporter):  # type: ignore[misc]
    """The SDK's OTLP/HTTP span exporter, encoding with `SpanEncoder`."""

    def __init__(self) -> None:
        super().__init__()
        self._encoder = SpanEncoder()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        try:
            data = self._encoder.encode(spans)
        except Exception:  # a span the encoder cannot write loses its batch, never the process
            logger.exception("could not encode a batch of %d spans", len(spans))
            return SpanExportResult.FAILURE
        if len(data) > self._max_request_size:
            logger.warning(
                "dropped a batch of %d spans: %d bytes is over the request limit", len(spans), len(data)
            )
            return SpanExportResult.FAILURE
        sent = self._client.export(data)
        return SpanExportResult.SUCCESS if sent.success else SpanExportResult.FAILURE
