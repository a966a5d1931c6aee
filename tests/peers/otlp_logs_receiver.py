"""A loopback OpenTelemetry logs receiver speaking OTLP/HTTP (`POST /v1/logs`, protobuf), for the OE's audit
export (issue 34). Jaeger takes no logs, so this stands in for a collector: it decodes each request with the
opentelemetry-proto package's ExportLogsServiceRequest (as a collector does), keeps the log records, checks
an API key header, and can refuse its first requests (503) so the exporter's retry is exercised."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)


@dataclass
class LogsReceiver:
    api_key: str
    fail_first: int = 0
    port: int = 0
    # Each decoded log record: {"resource": {...}, "scope": str, "body": str, "attributes": {...}}.
    records: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    requests: int = 0
    raw: list[bytes] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def audit(self, execution_id: str) -> list[dict[str, Any]]:
        """The exported audit lines of one execution, in order (records and heads)."""
        return [
            json.loads(r["body"])
            for r in list(self.records)
            if r["attributes"].get("audit.execution_id") == execution_id
        ]

    def wait_for(self, what: str, predicate: Any, timeout: float = 20) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [r for r in list(self.records) if predicate(r)]
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(
            f"no {what} after {timeout}s: {len(self.records)} records, refused {self.refused}"
        )


def _value(any_value: dict[str, Any]) -> Any:
    if "intValue" in any_value:
        return int(any_value["intValue"])  # proto3 JSON writes 64-bit integers as strings
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in any_value:
            return any_value[kind]
    return any_value


@contextmanager
def running_logs_receiver(*, api_key: str, fail_first: int = 0) -> Iterator[LogsReceiver]:
    receiver = LogsReceiver(api_key=api_key, fail_first=fail_first)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, body: bytes, content_type: str = "application/x-protobuf") -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            with lock:
                receiver.requests += 1
                if receiver.fail_first > 0:
                    receiver.fail_first -= 1
                    self._answer(503, b"", "text/plain")
                    return
            if self.path != "/v1/logs":
                self._answer(404, b"", "text/plain")
                return
            if self.headers.get("x-api-key") != receiver.api_key:
                receiver.refused.append("api key")
                self._answer(401, b"", "text/plain")
                return
            if self.headers.get("content-type") != "application/x-protobuf":
                receiver.refused.append(f"content-type {self.headers.get('content-type')}")
                self._answer(415, b"", "text/plain")
                return
            request = ExportLogsServiceRequest()
            try:
                request.ParseFromString(raw)
            except Exception as exc:  # a malformed body: what a collector answers, 400
                receiver.refused.append(f"undecodable: {exc}")
                self._answer(400, b"", "text/plain")
                return
            decoded = MessageToDict(request)
            with lock:
                receiver.raw.append(raw)
                for resource_logs in decoded.get("resourceLogs", []):
                    resource = {
                        a["key"]: _value(a["value"])
                        for a in resource_logs.get("resource", {}).get("attributes", [])
                    }
                    for scope_logs in resource_logs.get("scopeLogs", []):
                        for record in scope_logs.get("logRecords", []):
                            receiver.records.append(
                                {
                                    "resource": resource,
                                    "scope": scope_logs.get("scope", {}).get("name"),
                                    "body": record.get("body", {}).get("stringValue"),
                                    "severity": record.get("severityText"),
                                    "time_unix_nano": int(record.get("timeUnixNano", 0)),
                                    "attributes": {
                                        a["key"]: _value(a["value"]) for a in record.get("attributes", [])
                                    },
                                }
                            )
            self._answer(200, ExportLogsServiceResponse().SerializeToString())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
