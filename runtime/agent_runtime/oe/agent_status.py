"""What the OE knows of an Agent's own status: its conditions and bundle digest, as the operator last wrote
them on the Agent resource and carried in the registration (issue 30: the console's Agents page).

The OE reads nothing outside its namespace (Decision 12), so the operator republishes the registration
whenever the Agent's status changes; what the OE shows is the status as of that write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class AgentCondition(BaseModel):
    """One condition of the Agent's status (`kubectl get agent -o yaml`), as the operator wrote it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)

    type: str = Field(min_length=1, max_length=316)
    status: str = Field(max_length=16)
    reason: str = Field(default="", max_length=1024)
    message: str = Field(default="", max_length=32768)
    last_transition_time: str = Field(default="", max_length=64)


class AgentStatusSummary(BaseModel):
    """The Agent's conditions and the digest of the bundle it runs."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    bundle_digest: str = Field(default="", max_length=128)
    observed_generation: int = 0
    conditions: tuple[AgentCondition, ...] = ()


def status_summary(status: Mapping[str, Any]) -> AgentStatusSummary | None:
    """The summary of an Agent's status subresource; None while it has none (a new Agent)."""
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type")]
    digest = (status.get("bundle") or {}).get("digest") or ""
    if not conditions and not digest:
        return None
    return AgentStatusSummary(
        bundle_digest=str(digest),
        observed_generation=int(status.get("observedGeneration") or 0),
        conditions=tuple(AgentCondition.model_validate(dict(c)) for c in conditions),
    )
