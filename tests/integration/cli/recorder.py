"""A recording proxy between the CLI and the OE, and the check of what it saw against the OE's OpenAPI
document: every request the CLI sends (path, method, query, body) and every JSON answer it gets must fit.

The proxy is a real loopback HTTP server (a thread of the test process) forwarding to the real OE, byte for
byte, streaming the event stream as it comes.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from jsonschema import Draft202012Validator

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Exchange:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    status: int = 0
    content_type: str = ""
    answer: bytes = b""


@dataclass
class Recorder:
    upstream: str
    exchanges: list[Exchange] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Recorder:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:  # quiet
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urlsplit(self.path)
                seen = Exchange(self.command, split.path, parse_qs(split.query), body)
                recorder.exchanges.append(seen)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                timeout = httpx.Timeout(30.0, read=None)
                with (
                    httpx.Client(base_url=recorder.upstream, timeout=timeout) as client,
                    client.stream(self.command, self.path, headers=headers, content=body) as answer,
                ):
                    seen.status, seen.content_type = (
                        answer.status_code,
                        answer.headers.get("content-type", ""),
                    )
                    self.send_response(answer.status_code)
                    for key, value in answer.headers.items():
                        if key.lower() not in HOP_BY_HOP and key.lower() != "content-encoding":
                            self.send_header(key, value)
                    self.end_headers()
                    try:
                        for chunk in answer.iter_raw():
                            if "text/event-stream" not in seen.content_type:
                                seen.answer += chunk
                            self.wfile.write(chunk)
                            self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # the CLI stopped following (Ctrl-C, a final event)

            do_GET = do_POST = do_DELETE = do_PUT = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _validator(document: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    # The schema's $refs point into the document's components: make them part of its root.
    return Draft202012Validator({**schema, "components": document["components"]})


def _operation(document: dict[str, Any], method: str, path: str) -> dict[str, Any] | None:
    for template, methods in document["paths"].items():
        parts = ["[^/]+" if part.startswith("{") else re.escape(part) for part in template.split("/")]
        pattern = "^" + "/".join(parts) + "$"
        if re.match(pattern, path) and method.lower() in methods:
            return dict(methods[method.lower()])
    return None


def problems(document: dict[str, Any], exchanges: list[Exchange]) -> list[str]:
    """Each request or JSON answer that does not fit the document, described; empty when all fit."""
    found: list[str] = []
    for seen in exchanges:
        where = f"{seen.method} {seen.path}"
        op = _operation(document, seen.method, seen.path)
        if op is None:
            found.append(f"{where}: not in the document")
            continue
        declared = {p["name"]: p for p in op.get("parameters", []) if p["in"] == "query"}
        for name, values in seen.query.items():
            if name not in declared:
                found.append(f"{where}: query {name} is not declared")
                continue
            schema = declared[name]["schema"]
            for raw in values:
                value: Any = int(raw) if schema.get("type") == "integer" and raw.isdigit() else raw
                for error in _validator(document, schema).iter_errors(value):
                    found.append(f"{where}: query {name}={raw!r}: {error.message}")
        body_spec = (op.get("requestBody") or {}).get("content", {}).get("application/json")
        if seen.body:
            if body_spec is None:
                found.append(f"{where}: sends a body the document does not declare")
            else:
                for error in _validator(document, body_spec["schema"]).iter_errors(json.loads(seen.body)):
                    found.append(f"{where}: body: {error.message} at {list(error.absolute_path)}")
        elif body_spec is not None and (op.get("requestBody") or {}).get("required"):
            found.append(f"{where}: sends no body; the document requires one")
        answer_spec = op["responses"].get(str(seen.status))
        if answer_spec is None:
            found.append(f"{where}: answered {seen.status}, which the document does not list")
        elif "application/json" in seen.content_type and seen.answer:
            schema = answer_spec.get("content", {}).get("application/json", {}).get("schema")
            if schema is not None:
                for error in _validator(document, schema).iter_errors(json.loads(seen.answer)):
                    found.append(f"{where} -> {seen.status}: {error.message} at {list(error.absolute_path)}")
    return found
