"""A child Agent call through the OE, for the tests and the bench (issue 38): the loop tenant's bundle gets
an `agent` connector `child` whose card is the OE's own for `team-a/loop`, so a call of `a2a_child.run`
is an A2A `SendMessage` from the Tool Pod to the OE, which starts a child execution governed in its own
right (its own policy, audit and holds). The card is given, not fetched: the bundle is built before the
OE starts. Not yet agentRef: the child runs as the connector's token's identity, and nothing links it to
its parent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent_runtime.connectors import (
    build_bundle,
    compile_catalog,
    materialize_connector,
    scaffold_tool_yaml,
    write_bundle,
)
from agent_runtime.connectors.builtin.agent import materialize_agent
from tests.conftest import Process, free_port
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, LOOP_TENANT, Platform, Tenant
from tests.integration.runtime.launched import PROVIDER_OPENAPI

CHILD_TOOL = "a2a_child.run"
REF_TOOL = "agent.loop"
TOKEN_ENV = "CHILD_OE_TOKEN"
CARD = {
    "name": AGENT,
    "skills": [{"id": "run", "name": "run", "description": f"run {AGENT} once", "tags": ["read-only"]}],
}


def child_tenant(oe_port: int) -> Tenant:
    def bundle(directory: Path, provider_url: str) -> Path:
        catalog = compile_catalog(PROVIDER_OPENAPI, connector_name="echo")
        echo = materialize_connector(scaffold_tool_yaml(catalog, base_url=provider_url), catalog)
        child = materialize_agent(
            name="child",
            config={"card_url": f"http://127.0.0.1:{oe_port}/a2a/{AGENT}/.well-known/agent-card.json"},
            credentials={"token": TOKEN_ENV},
            card=CARD,
        )
        return write_bundle(build_bundle([echo], [child]), directory)

    return Tenant(
        entrypoint=LOOP_TENANT.entrypoint,
        pythonpath=LOOP_TENANT.pythonpath,
        bundle=bundle,
        tool_env={**LOOP_TENANT.tool_env, TOKEN_ENV: CLIENT_TOKEN},
    )


def child_platform(
    *, tmp: Path, spawn: Callable[..., Process], llm_base_url: str, provider_url: str
) -> Platform:
    """Started: Tool Pod, AER and OE, the Agent able to call itself as a child through the OE: over A2A
    from the Tool Pod (`CHILD_TOOL`), and by reference (`REF_TOOL`)."""
    oe_port = free_port()
    return Platform(
        tmp=tmp,
        spawn=spawn,
        llm_base_url=llm_base_url,
        provider_url=provider_url,
        tenant=child_tenant(oe_port),
        oe_port=oe_port,
        # The same child by reference (agentRef): the OE runs it itself, as the parent's user.
        registration={"agentRefs": [{"tool": REF_TOOL, "agent": AGENT}]},
    ).start()
