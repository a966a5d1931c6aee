"""servers/oom_kills.py: where a cgroup keeps its OOM kill count, and when a dead worker was the victim."""

from __future__ import annotations

import signal
from pathlib import Path

from agent_runtime.servers.oom_kills import _counter, counter_files, killed_by_oom

ROOT = Path("/sys/fs/cgroup")


def test_cgroup_v1_reads_the_memory_controller_then_the_mount_itself() -> None:
    proc = "9:name=systemd:/kubepods/pod1/c1\n4:memory:/kubepods/pod1/c1\n0::/\n"
    files = counter_files(proc)
    assert files[:2] == [
        ROOT / "memory/kubepods/pod1/c1/memory.oom_control",  # the host's view
        ROOT / "memory/memory.oom_control",  # a container's: its own cgroup is the mount
    ]
    assert ROOT / "memory.events" in files[2:]  # the unified hierarchy last (hybrid: no memory there)


def test_cgroup_v2_reads_memory_events() -> None:
    assert counter_files("0::/kubepods/pod1/c1\n") == [
        ROOT / "kubepods/pod1/c1/memory.events",
        ROOT / "memory.events",
    ]
    assert counter_files("0::/\n") == [ROOT / "memory.events"]


def test_the_counter_line_of_either_file() -> None:
    assert _counter("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n") == 3
    assert _counter("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n") == 2
    assert _counter("oom_kill_disable 0\n") is None


def test_only_a_sigkill_while_the_count_rose_is_the_oom_killer() -> None:
    kill = -signal.SIGKILL
    assert killed_by_oom(kill, before=0, after=1)
    assert not killed_by_oom(kill, before=1, after=1)  # someone else's SIGKILL
    assert not killed_by_oom(1, before=0, after=1)  # exited on its own
    assert not killed_by_oom(-signal.SIGTERM, before=0, after=1)
    assert not killed_by_oom(kill, before=None, after=1)  # no cgroupfs: never claimed
