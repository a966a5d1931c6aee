"""Whether the kernel's out-of-memory killer ended a tenant tool worker: its cgroup's `oom_kill` count.

A tool body that allocates past the Tool Pod container's memory limit is killed by the kernel's cgroup OOM
killer. On cgroup v1 (and on v2 without `memory.oom.group`) it picks the largest process, the worker, and the
Tool Pod lives on; the worker's call must then say so plainly ("out of memory: raise the limit"), not just
"the worker exited". The evidence is the container cgroup's OOM kill counter, read before the worker
starts and after it died with SIGKILL: `memory.events` (v2) or `memory.oom_control` (v1), both `oom_kill N`.
"""

from __future__ import annotations

import signal
from pathlib import Path

OUT_OF_MEMORY = "out_of_memory"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _counter(text: str) -> int | None:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def counter_files(proc_cgroup: str, *, root: Path = CGROUP_ROOT) -> list[Path]:
    """Where this process's cgroup keeps its OOM kill count, most specific first.

    `/proc/self/cgroup` names the cgroup as the host sees it; inside a container without a cgroup namespace
    (cgroup v1) that path does not exist under the container's /sys/fs/cgroup, which is the container's own
    cgroup mounted at the root: so the path under the mount, then the mount itself."""
    files: list[Path] = []
    for line in proc_cgroup.splitlines():
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        relative = path.strip().lstrip("/")
        if controllers == "" and path:  # v2, unified
            files += [root / relative / "memory.events", root / "memory.events"]
        elif "memory" in controllers.split(","):
            files += [
                root / "memory" / relative / "memory.oom_control",
                root / "memory" / "memory.oom_control",
            ]
    # v1 first: on a hybrid layout the unified hierarchy holds no memory controller.
    return sorted(dict.fromkeys(files), key=lambda f: f.name != "memory.oom_control")


def oom_kills() -> int | None:
    """This process's cgroup's OOM kill count; None where it cannot be read (not Linux, no cgroupfs)."""
    try:
        files = counter_files(Path("/proc/self/cgroup").read_text())
    except OSError:
        return None
    for file in files:
        try:
            value = _counter(file.read_text())
        except OSError:
            continue
        if value is not None:
            return value
    return None


def killed_by_oom(returncode: int | None, *, before: int | None, after: int | None) -> bool:
    """A worker that died of SIGKILL while its cgroup's OOM kill count rose was the OOM killer's victim."""
    if returncode != -signal.SIGKILL or before is None or after is None:
        return False
    return after > before


def out_of_memory_explanation(tools: tuple[str, ...]) -> str:
    return (
        f"the kernel's out-of-memory killer ended the worker process of tool(s) {', '.join(tools)}: the Tool "
        "Pod is over its memory limit; raise the Agent's spec.components.tool.resources.limits.memory or "
        "make the tool use less"
    )
