"""`webhook`: `webhook.send` POSTs a JSON payload to the one configured URL (sensitive), signed when a
signing secret is configured (Decision 17):

    X-Webhook-Timestamp: <unix seconds>
    X-Signature-256: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>" with the secret>

A receiver verifies it like this (and refuses timestamps older than a few minutes, against replays):

    expected = "sha256=" + hmac.new(secret, f"{timestamp}.".encode() + raw_body, hashlib.sha256).hexdigest()
    ok = hmac.compare_digest(expected, request.headers["X-Signature-256"])
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from agent_runtime.connectors.builtin._rest import RestClient, host_port
from agent_runtime.connectors.framework import BuiltinConnector, TestResult, tool

SIGNATURE_HEADER = "X-Signature-256"
TIMESTAMP_HEADER = "X-Webhook-Timestamp"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The X-Signature-256 value for `body` sent at `timestamp`."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class WebhookConnector(BuiltinConnector):
    type = "webhook"
    description = "POST JSON to one fixed URL, optionally signed with HMAC-SHA256."
    config_schema = {
        "type": "object",
        "required": ["url"],
        "additionalProperties": False,
        "properties": {
            "url": {"type": "string", "pattern": r"^https?://[^\s/?#]+", "maxLength": 2048},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string", "maxLength": 1024},
                "description": "fixed, non-secret headers sent with every call",
            },
            "timeout_s": {"type": "number", "minimum": 1, "maximum": 120, "default": 30},
        },
    }
    secrets = {"signing_secret": "the HMAC-SHA256 key; without it nothing is signed"}
    tools = (
        tool(
            "webhook.send",
            "POST a JSON payload to the configured webhook URL. Needs approval.",
            properties={"payload": {"description": "any JSON value; sent as the request body"}},
            required=["payload"],
            sensitive=True,
        ),
    )

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._rest = RestClient(provider="the webhook receiver", timeout_s=float(self.config["timeout_s"]))

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        body = json.dumps(arguments["payload"], ensure_ascii=False, separators=(",", ":")).encode()
        headers = {**(self.config.get("headers") or {}), "Content-Type": "application/json"}
        secret = self.secret("signing_secret", env, required="signing_secret" in self.credentials)
        if secret:
            timestamp = int(time.time())
            headers[TIMESTAMP_HEADER] = str(timestamp)
            headers[SIGNATURE_HEADER] = sign(secret, timestamp, body)
        response = await self._rest.request(
            "POST", self.config["url"], headers=headers, content=body, read=False, secrets=[secret or ""]
        )
        text = response.content.decode("utf-8", errors="replace")
        return {"status": response.status_code, "response": text[:4000], "signed": bool(secret)}

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        # Sending would deliver an event: only say what would be sent.
        return TestResult(ok=True, detail=f"would POST to {host_port(self.config['url'])[0]}")

    async def aclose(self) -> None:
        await self._rest.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        return [host_port(config["url"])]
