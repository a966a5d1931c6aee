"""Running the real `agentengine` console script against a platform, as a subprocess (no terminal)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.loop.harness import CLIENT_TOKEN, Platform

SCRIPT = Path(sys.executable).with_name("agentengine")


def cli_env(
    platform: Platform | None, *, token: str | None = CLIENT_TOKEN, env: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of one run: the platform's OE and token, no kubeconfig unless the test gives one."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENGINE_", "KUBECONFIG"))}
    base["KUBECONFIG"] = "/nonexistent"
    if platform is not None:
        # Through the recording proxy when the test has one (conftest.checked_against_openapi).
        base["AGENTENGINE_SERVER"] = getattr(platform, "cli_url", None) or platform.oe_url
    if token is not None:
        base["AGENTENGINE_TOKEN"] = token
    return {**base, **(env or {})}


def run(
    platform: Platform | None,
    *argv: str,
    token: str | None = CLIENT_TOKEN,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """The console script with the platform's OE."""
    return subprocess.run(
        [str(SCRIPT), *argv],
        env=cli_env(platform, token=token, env=env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok_json(platform: Platform | None, *argv: str, **kwargs: Any) -> Any:
    done = run(platform, *argv, "-o", "json", **kwargs)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def one_line_error(done: subprocess.CompletedProcess[str], *, code: int) -> str:
    """The run failed with `code` and said so in one `error: ...` line, no traceback; that line."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, (done.returncode, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    return lines[0]
