"""`make run` as a test, so it never rots: the demo runs to its answer and leaves nothing behind, and an
interrupt at any point stops every process and removes every directory."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.cluster.controlplane import ControlPlane
from tests.cluster.processes import pid_alive
from tests.conftest import REPO_ROOT


def _start(*, once: bool = True) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
    # What `make run` gives it: the test tier's control plane, as a separate program.
    env.setdefault(
        "AGENT_ENGINE_CONTROL_PLANE", f"{sys.executable} -m tests.cluster.controlplane serve --nodes 1"
    )
    return subprocess.Popen(
        [sys.executable, "-m", "agent_runtime.demo", *(["--once"] if once else [])],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _directories(output: str) -> list[Path]:
    return [Path(m) for m in re.findall(r"(?:work|control plane) directory (\S+)", output)]


def _descendants(pid: int) -> list[int]:
    """Every process whose parent chain reaches `pid` (read before it exits)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def test_make_run_shows_a_governed_turn_with_an_approval_and_cleans_up(cluster: ControlPlane) -> None:
    # As `make run` runs it: serving after the demo, until Ctrl-C.
    proc = _start(once=False)
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 600
    while "The console: " not in seen:
        line = proc.stdout.readline()
        assert line and time.monotonic() < deadline, seen
        seen += line
    # Issue 30: the console's URL is printed and it keeps serving after the demo.
    console = re.search(r"The console: (http://\S+/console)", seen)
    assert console, seen
    for _ in range(2):
        page = httpx.get(console.group(1) + "/sign-in", timeout=10)
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
        assert httpx.get(console.group(1) + "/inbox", timeout=10).headers["location"] == "/console/sign-in"
        time.sleep(2)
    assert proc.poll() is None, "make run stopped serving"
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    output = seen + rest
    assert proc.returncode == 0, output
    assert "Ready: bundle" in output
    # Issue 27: the AER's runtime token does not open its Tool Pod (the approval journey still works).
    assert "the Tool Pod refuses the AER's runtime token: HTTP 401" in output
    assert "Approval needed: sign_message" in output
    assert "(from the replay cache)" in output
    assert re.search(r"step 5 +tool +sign_message +approved via tool_pod", output), output
    assert "Answer: 'hello brave new world' has 4 words" in output
    # Issue 28: the OE took the demo's Kubernetes identity, a ServiceAccount's audience-bound token.
    assert "client identity: ServiceAccount demo/demo-user" in output
    assert "kubectl create token demo-user --namespace demo --audience agent-engine" in output
    assert "Invoked by: system:serviceaccount:demo:demo-user" in output
    assert "Decided by: system:serviceaccount:demo:demo-user" in output
    assert "stopped: no process and no directory left behind" in output
    for directory in _directories(output):
        assert not directory.exists(), directory


@pytest.mark.parametrize("stop_at", ["[2/6]", "[4/6]", "[6/6]"])
def test_an_interrupt_at_any_step_leaves_nothing_running(cluster: ControlPlane, stop_at: str) -> None:
    proc = _start()
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 300
    while stop_at not in seen:
        line = proc.stdout.readline()
        assert line and time.monotonic() < deadline, seen
        seen += line
    started = _descendants(proc.pid)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    output = seen + rest
    assert "stopped: no process and no directory left behind" in output, output
    time.sleep(1)
    assert [pid for pid in started if pid_alive(pid)] == []
    for directory in _directories(output):
        assert not directory.exists(), directory
