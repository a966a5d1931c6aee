"""The drain platform with the TypeScript runner as its AER and Tool Pod, running the TS twin of the drain
tenant (runtime-ts/packages/runner/test/tenants/drain_agent.ts); the OE is the Python one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import Process
from tests.integration.drain.harness import DrainPlatform, _empty_bundle
from tests.integration.ts_runner.node_platform import NodeRuntimes, require_build, ts_tenant

TS_DRAIN_TENANT = ts_tenant("drain_agent", bundle=_empty_bundle, tool_env={})


@dataclass
class NodeDrainPlatform(NodeRuntimes, DrainPlatform):
    """A drain platform whose AER and Tool Pod are the TypeScript runner."""


def start_node_platform(
    tmp: Path, spawn: Callable[..., Process], settings: Mapping[str, str]
) -> NodeDrainPlatform:
    require_build("drain_agent")
    tmp.mkdir(parents=True, exist_ok=True)
    return NodeDrainPlatform(
        tmp=tmp,
        spawn=spawn,
        llm_base_url="http://127.0.0.1:9/v1",  # the drain tenant never calls a model
        provider_url="http://127.0.0.1:9",
        tenant=TS_DRAIN_TENANT,
        runtime_env=dict(settings),
    ).start()
