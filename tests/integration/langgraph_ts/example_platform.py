"""examples/langgraphjs-agent on a loopback platform: the Python OE, the TypeScript runner as AER and Tool
Pod (`node .../launcher.js`) running the example's compiled agent, the AER's checkpoint store set as the
operator renders it. `make ts` builds the runner and the example; without the build a test fails saying so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO_ROOT, Process
from tests.integration.drain.harness import _empty_bundle
from tests.integration.loop.harness import Platform, Tenant
from tests.integration.ts_runner.node_platform import NodeRuntimes, require_build

EXAMPLE = REPO_ROOT / "examples" / "langgraphjs-agent"
AGENT_JS = EXAMPLE / "dist" / "agent.js"
REFUND_TOKEN = "refund-token-canary-6b1e2d"
SDK_TENANTS = REPO_ROOT / "runtime-ts" / "packages" / "sdk-langgraph" / "dist" / "test" / "tenants"


def example_tenant(refund_url: str) -> Tenant:
    return Tenant(
        entrypoint=f"{AGENT_JS}:app",
        pythonpath=EXAMPLE,
        bundle=_empty_bundle,
        # The refund credential and where the provider is: the Tool Pod's env only.
        tool_env={"REFUND_TOKEN": REFUND_TOKEN, "REFUND_PROVIDER_URL": refund_url},
    )


@dataclass
class ExamplePlatform(NodeRuntimes, Platform):
    """The loop platform, TS runtimes, with the AER's checkpoint env (the operator renders it so)."""

    checkpoint_env: dict[str, str] = field(default_factory=dict)

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        if mode == "aer":
            env.update(self.checkpoint_env)
        return env


def example_platform(
    tmp: Path,
    spawn: Callable[..., Process],
    *,
    llm_base_url: str,
    refund_url: str,
    checkpoint_env: dict[str, str],
    tenant: Tenant | None = None,
) -> ExamplePlatform:
    """The platform running the example (or `tenant`, one of the SDK's test tenants)."""
    require_build()
    tenant = tenant or example_tenant(refund_url)
    built = Path(tenant.entrypoint.rsplit(":", 1)[0])
    if not built.exists():
        raise RuntimeError(f"{built} is missing: build the TypeScript workspace first (make ts)")
    return ExamplePlatform(
        tmp=tmp,
        spawn=spawn,
        llm_base_url=llm_base_url,
        provider_url=refund_url,
        tenant=tenant,
        checkpoint_env=checkpoint_env,
    ).start()


def sdk_tenant(module: str) -> Tenant:
    """One of the SDK's test tenants (runtime-ts/packages/sdk-langgraph/test/tenants), compiled."""
    return Tenant(
        entrypoint=f"{SDK_TENANTS / f'{module}.js'}:app",
        pythonpath=SDK_TENANTS,
        bundle=_empty_bundle,
        tool_env={},
    )
