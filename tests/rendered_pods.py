"""Run a container the operator rendered as a local process: its command and env, its mounts as directories.

The contract test and `make run` both use this instead of a kubelet: ConfigMap and Secret volumes are
written where the pod would mount them (mount paths mapped into a directory), secret env comes from the
Secrets' data, and the process listens on a free loopback port.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agent_runtime import contract
from tests.conftest import REPO_ROOT, free_port, wait_for_port


def rendered_container_env(
    *,
    deployment: Mapping[str, Any],
    config_maps: Mapping[str, Mapping[str, str]],
    secrets: Mapping[str, Mapping[str, str]],
    root: Path,
) -> tuple[list[str], dict[str, str]]:
    """The container's argv and env, with every mounted volume written under `root`."""
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mount_map: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        target = root / mount["name"]
        target.mkdir(parents=True, exist_ok=True)
        volume = volumes[mount["name"]]
        if "projected" in volume:
            for source in volume["projected"]["sources"]:
                for key, value in config_maps[source["configMap"]["name"]].items():
                    (target / key).write_text(value)
        if "configMap" in volume:  # the OE's public key (issue 27)
            data = config_maps[volume["configMap"]["name"]]
            for item in volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]:
                (target / item["path"]).write_text(data[item["key"]])
        if "secret" in volume:
            data = secrets[volume["secret"]["secretName"]]
            for item in volume["secret"].get("items") or [{"key": k, "path": k} for k in data]:
                (target / item["path"]).write_text(data[item["key"]])
        mount_map[mount["mountPath"]] = target

    def local(value: str) -> str:
        for mount_path, target in mount_map.items():
            if value == mount_path or value.startswith(mount_path + "/"):
                return str(target) + value[len(mount_path) :]
        return value

    env: dict[str, str] = {"PATH": "/usr/bin:/bin"}
    for item in container.get("env", []):
        if "valueFrom" in item:
            source = item["valueFrom"]
            if "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                env[item["name"]] = secrets[ref["name"]][ref["key"]]
            elif "fieldRef" in source and source["fieldRef"]["fieldPath"] == "metadata.namespace":
                env[item["name"]] = deployment["metadata"]["namespace"]
        else:
            env[item["name"]] = local(item["value"])
    argv = [sys.executable if part == "python" else part for part in container["command"]]
    return argv, env


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
