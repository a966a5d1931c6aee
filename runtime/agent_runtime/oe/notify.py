"""Review notifications (issue 34): a review created, decided or expired goes to the Agent's
`spec.notify` targets, in the background, retried with backoff, never blocking the run.

A webhook target gets the JSON payload signed as the built-in webhook connector signs (`X-Webhook-Timestamp`,
`X-Signature-256: sha256=HMAC(secret, "<timestamp>.<body>")`, connectors/builtin/webhook.py). A Slack target
gets Slack's `chat.postMessage` (bearer token, `{channel, text}`; Slack answers `{"ok": false, "error"}`
with HTTP 200 for most failures). The payload is what the inbox shows (the review view, secrets redacted):
never a token, never the signing secret.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic.alias_generators import to_camel

from agent_runtime.connectors.builtin.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

logger = logging.getLogger(__name__)

ReviewEvent = Literal["review.created", "review.decided", "review.expired"]


class NotifyTarget(BaseModel):
    """One `spec.notify` entry as the registration carries it (the operator resolves secret refs)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    type: Literal["webhook", "slack"]
    url: str | None = Field(default=None, pattern=r"^https?://")  # webhook: where to POST
    signing_secret: SecretStr | None = None  # webhook: the HMAC key
    channel: str | None = Field(default=None, max_length=200)  # slack
    token: SecretStr | None = None  # slack: the bot token (the slack Connector's credential)
    base_url: str = Field(default="https://slack.com/api", pattern=r"^https?://")  # slack: the Web API root


class NotifySettings(BaseModel):
    attempts: int = 6
    first_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    timeout_s: float = 10.0


def payload(event: ReviewEvent, review: dict[str, Any], *, at: float) -> dict[str, Any]:
    return {"event": event, "at": at, **review}


def slack_text(body: dict[str, Any]) -> str:
    asks = body.get("asks") or {}
    what = asks.get("tool") or asks.get("kind") or "a call"
    verb = {
        "review.created": "waits for a reviewer",
        "review.decided": "was decided",
        "review.expired": "expired",
    }
    decision = f" ({body['decision']})" if body.get("decision") else ""
    return (
        f"{body.get('agent')}: {what} at step {asks.get('step')} of execution {body.get('execution_id')} "
        f"{verb.get(str(body.get('event')), 'changed')}{decision}"
    )


class Notifier:
    """Sends in background tasks; `aclose` waits for none (a lost notification is not a lost decision)."""

    def __init__(
        self, *, settings: NotifySettings | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings or NotifySettings()
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None
        self.delivered = 0
        self.failed = 0

    def send(self, targets: tuple[NotifyTarget, ...], event: ReviewEvent, review: dict[str, Any]) -> None:
        if not targets:
            return
        body = payload(event, review, at=self._clock())
        for target in targets:
            task = asyncio.get_running_loop().create_task(self._deliver(target, body))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the notifications in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.settings.timeout_s, follow_redirects=False)
        return self._client

    async def _deliver(self, target: NotifyTarget, body: dict[str, Any]) -> None:
        delay = self.settings.first_backoff_s
        for attempt in range(1, self.settings.attempts + 1):
            try:
                problem = await self._send_once(target, body)
            except httpx.HTTPError as exc:
                problem = type(exc).__name__
            if problem is None:
                self.delivered += 1
                return
            if attempt < self.settings.attempts:
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.settings.max_backoff_s)
        self.failed += 1
        # The target's type and the last problem only: never its URL's query, a token or the payload.
        logger.warning(
            "review notification to a %s target failed %d times: %s", target.type, attempt, problem
        )

    async def _send_once(self, target: NotifyTarget, body: dict[str, Any]) -> str | None:
        """None when delivered; otherwise what went wrong (retried)."""
        if target.type == "webhook":
            raw = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str).encode()
            headers = {"content-type": "application/json"}
            if target.signing_secret is not None:
                timestamp = int(self._clock())
                headers[TIMESTAMP_HEADER] = str(timestamp)
                headers[SIGNATURE_HEADER] = sign(target.signing_secret.get_secret_value(), timestamp, raw)
            response = await self._http().post(str(target.url), content=raw, headers=headers)
            return None if response.status_code < 300 else f"HTTP {response.status_code}"
        token = target.token.get_secret_value() if target.token is not None else ""
        response = await self._http().post(
            f"{target.base_url.rstrip('/')}/chat.postMessage",
            json={"channel": target.channel, "text": slack_text(body)},
            headers={"authorization": f"Bearer {token}"},
        )
        if response.status_code >= 300:
            return f"HTTP {response.status_code}"
        try:
            answer = response.json()
        except ValueError:
            return "Slack answered no JSON"
        return None if isinstance(answer, dict) and answer.get("ok") else f"Slack: {answer.get('error')}"


__all__ = ["Notifier", "NotifySettings", "NotifyTarget", "payload", "slack_text"]
