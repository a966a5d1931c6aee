"""The audit export stream (issue 34): each audit record (and each signed chain head) copied outside the OE's
store as it is appended, so a platform team keeps an audit the store's writers cannot reach.

Two sinks, either or both:

- JSONL to a file (`OE_AUDIT_EXPORT_FILE`): one record per line, `{"head": {...}}` lines between;
  `agentengine audit verify --file` checks it offline.
- OpenTelemetry logs over OTLP/HTTP (`OE_AUDIT_EXPORT_OTLP_ENDPOINT`, e.g. http://collector:4318; the path
  /v1/logs is added unless given): one LogRecord per record, its body the record as JSON, its attributes
  the execution, sequence number and chain hash (`audit.hash`, `audit.prev_hash`), so the collector's copy
  can be chained and verified too. `OE_AUDIT_EXPORT_OTLP_HEADERS` (`k=v,k2=v2`, e.g. an API key) go with
  each request and are never logged.

The OTLP sink never blocks an append: records go to a bounded queue a worker thread sends in batches,
retried with backoff; when the collector is away longer than the queue holds, the oldest are dropped and
counted (the store's copy and its signed head are what verify checks; the export is a copy).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx

logger = logging.getLogger(__name__)

EXPORT_FILE_ENV = "OE_AUDIT_EXPORT_FILE"
OTLP_ENDPOINT_ENV = "OE_AUDIT_EXPORT_OTLP_ENDPOINT"
OTLP_HEADERS_ENV = "OE_AUDIT_EXPORT_OTLP_HEADERS"
SCOPE = "agent_engine.audit"
SERVICE_NAME = "agent-engine-oe"


class AuditExport(Protocol):
    def write(self, line: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class JsonlExport:
    """Each audit record as one JSON line appended to a file (a platform team's copy outside the store;
    `agentengine audit verify --file` checks it offline). Heads go in as `{"head": {...}}` lines."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, line: dict[str, Any]) -> None:
        text = json.dumps(line, separators=(",", ":"), ensure_ascii=False, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(text)

    def close(self) -> None:
        return None


def _attribute_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool_value": value}
    if isinstance(value, int):
        return {"int_value": value}
    return {"string_value": str(value)}


def log_record_fields(line: Mapping[str, Any]) -> dict[str, Any]:
    """Pure: one exported line as a LogRecord's fields (body, attributes, time)."""
    head = line.get("head")
    record = head if isinstance(head, Mapping) else line
    attributes: dict[str, Any] = {"audit.kind": "head" if isinstance(head, Mapping) else "record"}
    for source, name in (
        ("execution_id", "audit.execution_id"),
        ("seq", "audit.seq"),
        ("hash", "audit.hash"),
        ("prev_hash", "audit.prev_hash"),
        ("kind", "audit.record_kind"),
        ("decision", "audit.decision"),
        ("kid", "audit.key_id"),
    ):
        if record.get(source) is not None:
            attributes[name] = record[source]
    at = record.get("at")
    seconds = float(at) if isinstance(at, int | float) else time.time()
    return {
        "body": json.dumps(line, separators=(",", ":"), ensure_ascii=False, default=str),
        "attributes": attributes,
        "time_unix_nano": int(seconds * 1e9),
    }


def encode_request(lines: Sequence[Mapping[str, Any]], *, service_name: str = SERVICE_NAME) -> bytes:
    """An OTLP ExportLogsServiceRequest (protobuf) holding one LogRecord per line."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    records = []
    for line in lines:
        fields = log_record_fields(line)
        records.append(
            LogRecord(
                time_unix_nano=fields["time_unix_nano"],
                observed_time_unix_nano=time.time_ns(),
                severity_number=9,  # INFO
                severity_text="INFO",
                event_name="agent_engine.audit",
                body=AnyValue(string_value=fields["body"]),
                attributes=[
                    KeyValue(key=k, value=AnyValue(**_attribute_value(v)))
                    for k, v in fields["attributes"].items()
                ],
            )
        )
    request = ExportLogsServiceRequest(
        resource_logs=[
            ResourceLogs(
                resource=Resource(
                    attributes=[KeyValue(key="service.name", value=AnyValue(string_value=service_name))]
                ),
                scope_logs=[ScopeLogs(scope=InstrumentationScope(name=SCOPE), log_records=records)],
            )
        ]
    )
    return bytes(request.SerializeToString())


def parse_headers(text: str) -> dict[str, str]:
    """`k=v,k2=v2` (the OTEL_EXPORTER_OTLP_HEADERS form). Raises ValueError naming the setting."""
    headers: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{OTLP_HEADERS_ENV}: write name=value pairs separated by commas")
        headers[name.strip().lower()] = value.strip()
    return headers


def logs_url(endpoint: str) -> str:
    base = endpoint.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ValueError(
            f"{OTLP_ENDPOINT_ENV}: {endpoint!r} is not an http(s) URL; e.g. http://collector:4318"
        )
    return base if base.endswith("/v1/logs") else f"{base}/v1/logs"


class OtlpLogsExport:
    """Sends each line as an OTLP log record from a worker thread: never blocks `write`."""

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_queue: int = 10_000,
        max_batch: int = 256,
        attempts: int = 8,
        first_backoff_s: float = 0.25,
        max_backoff_s: float = 10.0,
        timeout_s: float = 10.0,
    ) -> None:
        self.url = logs_url(endpoint)
        self._headers = {**(headers or {}), "content-type": "application/x-protobuf"}
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=max_queue)
        self._max_batch = max_batch
        self._attempts = attempts
        self._first_backoff_s = first_backoff_s
        self._max_backoff_s = max_backoff_s
        self._timeout_s = timeout_s
        self.sent = 0
        self.dropped = 0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="audit-otlp-export", daemon=True)
        self._thread.start()

    def write(self, line: dict[str, Any]) -> None:
        while True:
            try:
                self._queue.put_nowait(line)
                return
            except queue.Full:
                try:  # the oldest goes: the newest records (and heads) are the ones a reader wants
                    self._queue.get_nowait()
                    self.dropped += 1
                except queue.Empty:
                    pass

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (up to `timeout_s`), then stop the worker."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout_s)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        with httpx.Client(timeout=self._timeout_s, follow_redirects=False) as client:
            while True:
                first = self._queue.get()
                if first is None:
                    return
                batch = [first]
                stop = False
                while len(batch) < self._max_batch:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stop = True
                        break
                    batch.append(more)
                self._send(client, batch)
                if stop:
                    return

    def _send(self, client: httpx.Client, batch: list[dict[str, Any]]) -> None:
        body = encode_request(batch)
        delay = self._first_backoff_s
        problem = ""
        for attempt in range(1, self._attempts + 1):
            try:
                response = client.post(self.url, content=body, headers=self._headers)
            except httpx.HTTPError as exc:
                problem = type(exc).__name__
            else:
                if response.status_code < 300:
                    self.sent += len(batch)
                    return
                problem = f"HTTP {response.status_code}"
                if response.status_code < 500 and response.status_code not in (408, 429):
                    break  # refused for good (a bad request, a wrong key): retrying changes nothing
            if attempt < self._attempts and not self._closed.is_set():
                time.sleep(delay)
                delay = min(delay * 2, self._max_backoff_s)
        self.dropped += len(batch)
        # The endpoint's problem only: never the headers (they may hold a key) or a record.
        logger.warning("audit export to the OTLP logs endpoint dropped %d records: %s", len(batch), problem)


class Exports:
    """Each line to every configured sink."""

    def __init__(self, sinks: Sequence[AuditExport]) -> None:
        self.sinks = tuple(sinks)

    def write(self, line: dict[str, Any]) -> None:
        for sink in self.sinks:
            sink.write(line)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def export_from_env(env: Mapping[str, str] | None = None) -> Exports | None:
    """The sinks the environment names, or None. Raises ValueError naming the setting when one is bad."""
    env = env if env is not None else os.environ
    sinks: list[AuditExport] = []
    if path := env.get(EXPORT_FILE_ENV, "").strip():
        sinks.append(JsonlExport(path))
    if endpoint := env.get(OTLP_ENDPOINT_ENV, "").strip():
        sinks.append(OtlpLogsExport(endpoint, headers=parse_headers(env.get(OTLP_HEADERS_ENV, ""))))
    return Exports(sinks) if sinks else None


__all__ = [
    "EXPORT_FILE_ENV",
    "OTLP_ENDPOINT_ENV",
    "OTLP_HEADERS_ENV",
    "AuditExport",
    "Exports",
    "JsonlExport",
    "OtlpLogsExport",
    "encode_request",
    "export_from_env",
    "log_record_fields",
    "logs_url",
    "parse_headers",
]
