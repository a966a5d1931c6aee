"""A tool that needs more memory than its Tool Pod may have (issue 41): the Tool Pod runs in a real memory
cgroup with a limit, the kernel's OOM killer ends the tool's worker, and the call says `out_of_memory`.

The Tool Pod (the launcher in tool mode) starts inside a cgroup of its own, its limit written there, as the
kubelet writes a container's; the tenant is the chaos tier's (tests/chaos/images/agent), whose `allocate` tool
writes every page of what it is asked for. Needs root and a writable memory cgroup (v1 or v2), else skipped.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_runtime.servers.oom_kills import OUT_OF_MEMORY
from tests.conftest import REPO_ROOT, Process
from tests.integration.loop.harness import LOOP_TENANT, Platform, Tenant
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

CHAOS_TENANT = Tenant(
    entrypoint="chaos_agent.agent:app",
    pythonpath=REPO_ROOT / "tests" / "chaos" / "images" / "agent",
    bundle=LOOP_TENANT.bundle,
    tool_env=LOOP_TENANT.tool_env,
)
LIMIT_MIB = 400


def _memory_cgroup() -> tuple[Path, str, str] | None:
    """(directory, limit file, OOM counter file) of a new memory cgroup, or None where none can be made."""
    v1 = Path("/sys/fs/cgroup/memory")
    name = f"agent-engine-oom-test-{os.getpid()}-{secrets.token_hex(3)}"
    if (v1 / "memory.limit_in_bytes").exists():
        base, limit, counter = v1, "memory.limit_in_bytes", "memory.oom_control"
    elif (Path("/sys/fs/cgroup") / "cgroup.controllers").exists():
        base, limit, counter = Path("/sys/fs/cgroup"), "memory.max", "memory.events"
    else:
        return None
    try:
        (base / name).mkdir()
    except OSError:
        return None
    if not (base / name / limit).exists():  # v2 without the memory controller delegated here
        (base / name).rmdir()
        return None
    return base / name, limit, counter


def _oom_kills(counter: Path) -> int:
    line = next(line for line in counter.read_text().splitlines() if line.startswith("oom_kill "))
    return int(line.split()[1])


@pytest.fixture
def cgroup() -> Iterator[tuple[Path, str, str]]:
    made = _memory_cgroup() if os.geteuid() == 0 else None
    if made is None:
        pytest.skip("needs root and a memory cgroup to make (cgroup v1 or v2 with the memory controller)")
    directory, limit, _ = made
    (directory / limit).write_text(str(LIMIT_MIB * 2**20))
    swap_limit = directory / "memory.memsw.limit_in_bytes"  # v1: no swapping out of the limit either
    if swap_limit.exists():
        swap_limit.write_text(str(LIMIT_MIB * 2**20))
    yield made
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            directory.rmdir()
            return
        except OSError:  # processes still leaving
            time.sleep(0.2)


def test_a_tool_over_the_memory_limit_fails_out_of_memory_and_the_tool_pod_lives_on(
    tmp_path: Path, spawn: Callable[..., Process], cgroup: tuple[Path, str, str]
) -> None:
    directory, _, counter = cgroup

    def spawn_tool_pod_in_cgroup(argv: list[str], **kwargs: object) -> Process:
        if kwargs.get("name") == "tool":
            # Into the cgroup before the launcher starts, so its workers are born there too (as in a pod).
            argv = ["sh", "-c", f'echo $$ > {directory / "cgroup.procs"} && exec "$@"', "sh", *argv]
        return spawn(argv, **kwargs)

    with running_llm_peer() as peer, running_echo_provider() as provider:
        platform = Platform(
            tmp=tmp_path, spawn=spawn_tool_pod_in_cgroup, llm_base_url=peer.base_url,
            provider_url=provider.url, tenant=CHAOS_TENANT,
        ).start()  # fmt: skip
        tool_pod = platform.processes["tool"].popen.pid
        before = _oom_kills(directory / counter)
        calls = [
            ["allocate", {"mebibytes": 16}],
            ["allocate", {"mebibytes": 4 * LIMIT_MIB}],  # the worker dies here
            ["allocate", {"mebibytes": 16}],  # a new worker answers
        ]
        execution = platform.invoke({"calls": calls})
        view = platform.wait(execution, "completed", "failed", timeout=120)
        assert view["status"] == "completed", view
        first, over, after = view["result"]["results"]
        assert first == {"allocated_mib": 16}
        assert over["error"] == OUT_OF_MEMORY, over
        assert "out-of-memory killer" in over["explanation"], over
        assert "spec.components.tool.resources.limits.memory" in over["explanation"], over
        assert after == {"allocated_mib": 16}
        # The kernel did it, and it took the worker, not the Tool Pod.
        assert _oom_kills(directory / counter) > before
        assert platform.processes["tool"].popen.poll() is None
        assert platform.processes["tool"].popen.pid == tool_pod
        steps = [r for r in platform.audit(execution) if r.get("kind") == "tool"]
        assert [r.get("error_category") for r in steps] == [None, OUT_OF_MEMORY, None], steps
