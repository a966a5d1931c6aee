"""Run a container the operator rendered as a local process: its command and env, its mounts as directories.

The contract test uses this instead of a kubelet (`make run` uses agent_runtime.demo.rendered, which this
wraps): ConfigMap and Secret volumes are
written where the pod would mount them (mount paths mapped into a directory), secret env comes from the
Secrets' data, and the process listens on a free loopback port.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agent_runtime import contract
from agent_runtime.demo.rendered import rendered_container_env
from tests.conftest import REPO_ROOT, free_port, wait_for_port

__all__ = ["rendered_container_env", "run_rendered_container"]


def run_rendered_container(
    *,
    deployment: Mapping[str, Any],
    config_maps: Mapping[str, Mapping[str, str]],
    secrets: Mapping[str, Mapping[str, str]],
    root: Path,
    spawn: Callable[..., Any],
    pythonpath: str = str(REPO_ROOT),
    overrides: Mapping[str, str] | None = None,
) -> tuple[Any, int]:
    """Start the Deployment's container on a free loopback port; returns (process, port)."""
    argv, env = rendered_container_env(
        deployment=deployment, config_maps=config_maps, secrets=secrets, root=root
    )
    port = free_port()
    env.update({"PYTHONPATH": pythonpath, "RUNTIME_PORT": str(port), contract.APP_HOST_ENV: "127.0.0.1"})
    env.update(overrides or {})
    container_name = deployment["spec"]["template"]["spec"]["containers"][0]["name"]
    proc = spawn(argv, env=env, cwd=root, name=container_name)
    wait_for_port("127.0.0.1", port, timeout=30, proc=getattr(proc, "popen", proc))
    return proc, port
