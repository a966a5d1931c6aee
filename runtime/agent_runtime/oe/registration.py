"""What the OE knows about one Agent (Decision 12): its token, addresses, policy and tools.

The operator publishes one registration per Agent into the OE's namespace (a Secret); dev mode and tests
write the same document as a file. The OE refuses every call for an Agent it has no registration for.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic.alias_generators import to_camel

from agent_runtime.execution_token import Audience, Purpose, StatementSigner
from agent_runtime.oe.agent_status import AgentStatusSummary
from agent_runtime.oe.limits import Limits
from agent_runtime.oe.notify import NotifyTarget
from agent_runtime.oe.policy import ToolPolicy, policy_problems
from agent_runtime.oe.usage import PriceTable

# A Secret in the OE's namespace carrying one registration under this key, selected by this label.
REGISTRATION_KEY = "registration.json"
REGISTRATION_LABEL = "agentengine.io/oe-registration"


class ToolEntry(BaseModel):
    """One tool the Agent may call: where it runs and whether it is sensitive (Decision 6)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=256)
    # `agent`: another Agent called by reference, which the OE runs as a child execution (oe/children.py).
    location: Literal["local", "remote", "agent"]
    sensitive: bool = False
    agent: str | None = None  # location agent: the Agent it calls, `<namespace>/<name>`


AGENT_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$"


class AgentRef(BaseModel):
    """One `spec.agentRefs` entry (issue 38): the tool name the Agent calls it by and the Agent it names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1, max_length=256)
    agent: str = Field(pattern=AGENT_NAME_PATTERN)
    description: str = Field(default="", max_length=1024)
    sensitive: bool = False

    def entry(self) -> ToolEntry:
        return ToolEntry(name=self.tool, location="agent", sensitive=self.sensitive, agent=self.agent)

    def schema(self) -> dict[str, Any]:
        """The tool as a model is shown it (the AER adds it to the run's tools): one `input`, the child's."""
        return {
            "name": self.tool,
            "description": self.description
            or f"Run the Agent {self.agent} on an input and answer its result (a governed child execution).",
            "inputSchema": {
                "type": "object",
                "properties": {"input": {"description": f"the input of Agent {self.agent}"}},
                "required": ["input"],
            },
        }


class AgentRegistration(BaseModel):
    """One Agent as the OE sees it. `agent` is `<namespace>/<name>`."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    agent: str = Field(pattern=AGENT_NAME_PATTERN)
    token: SecretStr
    aer_url: str = Field(pattern=r"^https?://")
    tool_url: str = Field(pattern=r"^https?://")
    # The Agent's Memory server (spec.components.memory), for the client API's knowledge routes; None: none.
    memory_url: str | None = Field(default=None, pattern=r"^https?://")
    policy: ToolPolicy = ToolPolicy()
    tools: tuple[ToolEntry, ...] = ()
    # Other Agents this one calls by reference (spec.agentRefs): the OE routes these tools itself.
    agent_refs: tuple[AgentRef, ...] = ()
    # The Agent's own model prices (spec.pricing), over the OE's table (agent_runtime.oe.usage).
    prices: PriceTable | None = None
    # spec.limits (oe/limits.py) and where reviews are announced (spec.notify, oe/notify.py): issue 34.
    limits: Limits = Limits()
    notify: tuple[NotifyTarget, ...] = ()
    # The Agent's conditions and bundle digest as the operator last wrote them (oe/agent_status.py).
    status: AgentStatusSummary | None = None
    # Tokens this Agent held before its current one, each with the (monotonic) time its grace period ends;
    # set by the Registry, never read from a document (see `tokens`).
    _retired: tuple[tuple[SecretStr, float], ...] = PrivateAttr(default=())
    # The OE's signer (set by the Registry): calls to this Agent's runtimes carry a statement of it.
    _signer: StatementSigner | None = PrivateAttr(default=None)

    @field_validator("aer_url", "tool_url", "memory_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value is not None else None

    @model_validator(mode="after")
    def _conditions_compile(self) -> AgentRegistration:
        """A condition that does not compile refuses the whole registration, naming the rule's path."""
        problems = policy_problems(self.policy)
        if problems:
            raise ValueError("; ".join(f"policy.{path} {problem}" for path, problem in problems))
        return self

    @property
    def project_id(self) -> str:
        """The Agent's namespace (Decision 1)."""
        return self.agent.split("/", 1)[0]

    @property
    def workspace_id(self) -> str:
        """`APP_ID`: `<namespace>.<name>` (Decision 1)."""
        return self.agent.replace("/", ".", 1)

    def token_digest(self) -> str:
        """How the OE indexes tokens: a caller's token is looked up by digest, never compared in a loop."""
        return token_digest(self.token.get_secret_value())

    def tokens(self, *, now: float | None = None) -> tuple[str, ...]:
        """The tokens to call this Agent's runtimes with, in order: the current one, then each previous one
        still in its grace period (a runtime whose mounted token has not changed yet refuses the new one)."""
        moment = time.monotonic() if now is None else now
        retired = tuple(token.get_secret_value() for token, until in self._retired if moment < until)
        return (self.token.get_secret_value(), *retired)

    @property
    def retired(self) -> tuple[tuple[SecretStr, float], ...]:
        """Previous tokens with the end of each one's grace period."""
        return self._retired

    def with_retired(self, retired: tuple[tuple[SecretStr, float], ...]) -> AgentRegistration:
        """A copy holding these previous tokens (the Registry's, when the Agent's token changed)."""
        updated = self.model_copy()
        updated._retired = retired
        return updated

    @property
    def signer(self) -> StatementSigner | None:
        return self._signer

    def with_signer(self, signer: StatementSigner | None) -> AgentRegistration:
        """A copy whose runtime calls are signed by `signer` (the Registry's)."""
        updated = self.model_copy()
        updated._signer = signer
        return updated

    def statements(
        self,
        audience: Audience,
        *,
        execution_id: str = "",
        user_id: str | None = None,
        org_id: str | None = None,
        ttl_s: float | None = None,
        purpose: Purpose | None = None,
    ) -> tuple[str, ...]:
        """The OE's statements for one call to this Agent's `audience`: signed by the current key, then
        by the previous one while in grace (a runtime whose mounted public key has not changed yet)."""
        if self._signer is None:
            return ()
        claims: dict[str, Any] = {
            "audience": audience,
            "agent": self.agent,
            "workspace": self.workspace_id,
            "execution_id": execution_id,
            "user_id": user_id,
            "org_id": org_id,
            "purpose": purpose or ("execution" if execution_id else "control"),
            "ttl_s": ttl_s,
        }
        current = self._signer.issue(**claims)
        previous = self._signer.issue(**claims, previous_key=True)
        return tuple(statement for statement in (current, previous) if statement)

    def tool(self, name: str) -> ToolEntry | None:
        return self.agent_ref(name) or next((entry for entry in self.tools if entry.name == name), None)

    def agent_ref(self, name: str) -> ToolEntry | None:
        """The agentRef tool of that name, routed by the OE whatever the AER's list says."""
        return next((ref.entry() for ref in self.agent_refs if ref.tool == name), None)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def tool_entries(surface: list[dict[str, object]]) -> tuple[ToolEntry, ...]:
    """Registration entries from an AER's `GET /tools` answer (which says `is_local` and `sensitive`)."""
    return tuple(
        ToolEntry(
            name=str(tool["name"]),
            location="local" if tool.get("is_local") else "remote",
            sensitive=bool(tool.get("sensitive")),
        )
        for tool in surface
    )
