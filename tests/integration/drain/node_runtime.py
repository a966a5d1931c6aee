"""The TypeScript runner (runtime-ts/packages/runner) as the AER and the Tool Pod of a drain platform.

The OE stays the Python one; the AER and the Tool Pod are `node .../launcher.js` in their modes, configured
by the same env the operator renders (`component_env`), running the TS twin of the drain tenant
(runtime-ts/packages/runner/test/tenants/drain_agent.ts). `make ts` builds it; without the build the tests
fail saying so, never skip.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import REPO_ROOT, Process
from tests.integration.drain.harness import DrainPlatform, _empty_bundle
from tests.integration.loop.harness import Tenant

RUNNER_DIR = REPO_ROOT / "runtime-ts" / "packages" / "runner"
LAUNCHER = RUNNER_DIR / "dist" / "src" / "launcher.js"
TS_DRAIN_AGENT = RUNNER_DIR / "dist" / "test" / "tenants" / "drain_agent.js"

TS_DRAIN_TENANT = Tenant(
    entrypoint=f"{TS_DRAIN_AGENT}:app", pythonpath=RUNNER_DIR, bundle=_empty_bundle, tool_env={}
)


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH: the TypeScript runner needs Node.js 20 or later")
    return node


def require_build() -> None:
    for path in (LAUNCHER, TS_DRAIN_AGENT):
        if not path.exists():
            raise RuntimeError(f"{path} is missing: build the TypeScript workspace first (make ts)")


@dataclass
class NodeDrainPlatform(DrainPlatform):
    """A drain platform whose AER and Tool Pod are the TypeScript runner (the OE is the Python one)."""

    def _launch(self, env: dict[str, str], *, port: int, timeout: float = 30) -> Process:
        if env["RUNNER_MODE"] not in ("aer", "tool"):
            return super()._launch(env, port=port, timeout=timeout)
        proc = self.spawn([node_binary(), str(LAUNCHER)], env=env, name=f"node-{env['RUNNER_MODE']}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                mode, code = env["RUNNER_MODE"], proc.popen.returncode
                raise RuntimeError(f"node {mode} exited with {code}:\n{proc.output()}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=0.5).status_code == 200:
                    return proc
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"node {env['RUNNER_MODE']} not ready after {timeout}s:\n{proc.output()}")


def start_node_platform(
    tmp: Path, spawn: Callable[..., Process], settings: Mapping[str, str]
) -> NodeDrainPlatform:
    require_build()
    tmp.mkdir(parents=True, exist_ok=True)
    return NodeDrainPlatform(
        tmp=tmp,
        spawn=spawn,
        llm_base_url="http://127.0.0.1:9/v1",  # the drain tenant never calls a model
        provider_url="http://127.0.0.1:9",
        tenant=TS_DRAIN_TENANT,
        runtime_env=dict(settings),
    ).start()
