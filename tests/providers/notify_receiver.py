"""Loopback receivers for review notifications (issue 34): a webhook endpoint that verifies the HMAC
signature as a platform team's receiver would (and refuses its first request with 503, so the sender's
retry is exercised), and a Slack Web API stand-in speaking `chat.postMessage` (bearer token, JSON body,
Slack's `{"ok": ...}` answers with HTTP 200)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Receiver:
    secret: str
    slack_token: str
    webhooks: list[dict[str, Any]] = field(default_factory=list)  # verified bodies
    refused: list[str] = field(default_factory=list)  # why requests were refused
    slack: list[dict[str, Any]] = field(default_factory=list)
    fail_first: bool = True
    delay_s: float = 0.0  # a slow receiver: each webhook answered after this long (the run must not wait)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_for(self, what: str, predicate: Any, timeout: float = 20) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for item in list(getattr(self, what)):
                if predicate(item):
                    return item
            time.sleep(0.05)
        raise AssertionError(
            f"no matching {what} after {timeout}s: {getattr(self, what)} (refused: {self.refused})"
        )


def verify_signature(secret: str, headers: Any, raw: bytes, *, max_age_s: float = 300) -> str | None:
    """None if the webhook's signature is right and fresh; otherwise why not."""
    timestamp = headers.get("X-Webhook-Timestamp")
    signature = headers.get("X-Signature-256")
    if not timestamp or not signature:
        return "unsigned"
    if abs(time.time() - int(timestamp)) > max_age_s:
        return "stale timestamp"
    expected = (
        "sha256=" + hmac.new(secret.encode(), f"{timestamp}.".encode() + raw, hashlib.sha256).hexdigest()
    )
    return None if hmac.compare_digest(expected, signature) else "bad signature"


@contextmanager
def running_receiver(*, secret: str, slack_token: str) -> Iterator[Receiver]:
    receiver = Receiver(secret=secret, slack_token=slack_token)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path == "/hook":
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                with lock:
                    if receiver.fail_first:
                        receiver.fail_first = False
                        self._answer(503, {"error": "try again"})
                        return
                problem = verify_signature(receiver.secret, self.headers, raw)
                if problem is not None:
                    receiver.refused.append(problem)
                    self._answer(401, {"error": problem})
                    return
                receiver.webhooks.append(json.loads(raw))
                self._answer(200, {"ok": True})
            elif self.path == "/api/chat.postMessage":
                if self.headers.get("authorization") != f"Bearer {receiver.slack_token}":
                    self._answer(200, {"ok": False, "error": "invalid_auth"})
                    return
                body = json.loads(raw)
                if not body.get("channel"):
                    self._answer(200, {"ok": False, "error": "channel_not_found"})
                    return
                receiver.slack.append(body)
                self._answer(200, {"ok": True, "channel": body["channel"], "ts": f"{time.time():.6f}"})
            else:
                self._answer(404, {"error": "not found"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
