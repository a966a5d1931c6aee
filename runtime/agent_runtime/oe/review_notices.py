"""A review created, decided or expired, told to the Agent's `spec.notify` targets (issue 34), in the
background: a notice never blocks the run or the decision."""

from __future__ import annotations

from agent_runtime.oe.context import Secrets
from agent_runtime.oe.notify import Notifier, ReviewEvent
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.oe.views import review_view


class ReviewNotices:
    def __init__(self, notifier: Notifier, *, secrets: Secrets) -> None:
        self.notifier = notifier
        self.secrets = secrets

    def announce(self, reg: AgentRegistration | None, event: ReviewEvent, record: ExecutionRecord) -> None:
        """Tell the Agent's spec.notify targets about a review (what the inbox shows, no secrets)."""
        if reg is None or not reg.notify:
            return
        view = review_view(record, secrets=self.secrets.all(reg))
        if record.reviews and event != "review.created":
            last = record.reviews[-1]
            view["decision"] = last.decision
            view["decided_by"] = last.decided_by.username if last.decided_by else None
        self.notifier.send(reg.notify, event, view)
