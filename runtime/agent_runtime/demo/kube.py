"""kubectl and helm as programs against one cluster, and polling until a condition holds.

`make run` (agent_runtime.demo) drives the cluster with these; the install-journey tests use them too.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx


class StepFailed(AssertionError):
    """A step's command failed or its condition never held; the message carries the command's output."""


@dataclass(frozen=True)
class Kube:
    """kubectl and helm from `bin_dir`, with an environment naming the cluster (KUBECONFIG)."""

    bin_dir: Path
    env: Mapping[str, str]

    def run(
        self, tool: str, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 300
    ) -> str:
        proc = subprocess.run(
            [str(self.bin_dir / tool), *args],
            input=stdin,
            env=dict(self.env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise StepFailed(f"{tool} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}")
        return proc.stdout

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 300) -> str:
        return self.run("kubectl", *args, stdin=stdin, check=check, timeout=timeout)

    def helm(self, *args: str, check: bool = True) -> str:
        return self.run("helm", *args, check=check)

    def get_json(self, *args: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", *args, "-o", "json"))


# Errors a poll keeps trying through: a command that failed, a reply not there yet, a port not listening yet.
RETRYABLE: tuple[type[BaseException], ...] = (
    StepFailed,
    subprocess.TimeoutExpired,
    KeyError,
    ValueError,
    httpx.TransportError,
)


def eventually(what: str, check: Callable[[], Any], *, timeout: float = 120.0, interval: float = 1.0) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` and the last error."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except RETRYABLE as error:
            last = error
        else:
            if result:
                return result
            last = result
        time.sleep(interval)
    raise StepFailed(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
