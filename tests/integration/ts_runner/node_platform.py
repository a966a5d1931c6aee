"""The TypeScript runner (runtime-ts/packages/runner) as the AER and the Tool Pod of a loopback platform.

The OE stays the Python one; the AER and the Tool Pod are `node .../launcher.js` in their modes, configured
by the env the operator renders (`component_env`, through the loop harness). `make ts` builds the runner and
its test tenants; without the build a test fails saying so, never skips.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import REPO_ROOT, Process
from tests.integration.loop.harness import Platform, Tenant, _loop_bundle
from tests.integration.runtime.launched import CONNECTOR_SECRET

RUNNER_DIR = REPO_ROOT / "runtime-ts" / "packages" / "runner"
LAUNCHER = RUNNER_DIR / "dist" / "src" / "launcher.js"
TENANTS = RUNNER_DIR / "dist" / "test" / "tenants"
LOOP_SECRET = "ts-loop-secret-7f3a9c21e0"


def ts_tenant(module: str, *, bundle: object, tool_env: dict[str, str]) -> Tenant:
    """A TS tenant module of the runner's test tenants (`drain_agent`, `loop_agent`)."""
    return Tenant(
        entrypoint=f"{TENANTS / f'{module}.js'}:app",
        pythonpath=RUNNER_DIR,
        bundle=bundle,  # type: ignore[arg-type]
        tool_env=tool_env,
    )


TS_LOOP_TENANT = ts_tenant(
    "loop_agent", bundle=_loop_bundle, tool_env={"ECHO_TOKEN": CONNECTOR_SECRET, "LOOP_SECRET": LOOP_SECRET}
)


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH: the TypeScript runner needs Node.js 20 or later")
    return node


def require_build(*modules: str) -> None:
    for path in (LAUNCHER, *(TENANTS / f"{module}.js" for module in modules)):
        if not path.exists():
            raise RuntimeError(f"{path} is missing: build the TypeScript workspace first (make ts)")


class NodeRuntimes:
    """Mixed into a Platform: its AER and Tool Pod are the TS launcher, the OE is the Python one."""

    spawn: object

    def _launch(self, env: dict[str, str], *, port: int, timeout: float = 30) -> Process:
        mode = env["RUNNER_MODE"]
        if mode not in ("aer", "tool"):
            return super()._launch(env, port=port, timeout=timeout)  # type: ignore[misc]
        proc: Process = self.spawn([node_binary(), str(LAUNCHER)], env=env, name=f"node-{mode}")  # type: ignore[operator]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"node {mode} exited with {proc.popen.returncode}:\n{proc.output()}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=0.5).status_code == 200:
                    return proc
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"node {mode} not ready after {timeout}s:\n{proc.output()}")


@dataclass
class NodePlatform(NodeRuntimes, Platform):
    """The loop platform with the TS runner as AER and Tool Pod."""


def node_platform(tmp: Path, spawn: object, *, llm_base_url: str, provider_url: str) -> NodePlatform:
    require_build("loop_agent")
    return NodePlatform(
        tmp=tmp,
        spawn=spawn,  # type: ignore[arg-type]
        llm_base_url=llm_base_url,
        provider_url=provider_url,
        tenant=TS_LOOP_TENANT,
    )
