"""A container the operator or the chart rendered, as a local process: its command and env, its mounts as
directories. `make run` runs the rendered OE, AER and Tool Pod this way (a KWOK node stands in for the
kubelet); the contract tests do the same.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


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
                if "configMap" in source:
                    for key, value in config_maps[source["configMap"]["name"]].items():
                        (target / key).write_text(value)
                    continue
                ref = source["secret"]  # an MCP OAuth login's Secret (optional: it may not exist yet)
                found = secrets.get(ref["name"])
                if found is None and ref.get("optional"):
                    continue
                data = found if found is not None else secrets[ref["name"]]
                for item in ref.get("items") or [{"key": k, "path": k} for k in data]:
                    if item["key"] in data:
                        (target / item["path"]).write_text(data[item["key"]])
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
