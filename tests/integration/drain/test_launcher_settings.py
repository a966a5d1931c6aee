"""The drain settings and the pod IP at start-up: a bad value is one JSON error naming it, and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_runtime.launcher import EXIT_BAD_CONFIG
from tests.integration.runtime.launched import new_port, operator_env


@pytest.mark.parametrize("mode", ["aer", "tool"])
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RUNNER_DRAIN_MAX_DEADLINE_MS", "60s"),
        ("RUNNER_DRAIN_MAX_DEADLINE_MS", "0"),
        ("RUNNER_DRAIN_RECORD_TTL_S", "-1"),
        ("RUNNER_DRAIN_RECORD_TTL_S", "15m"),
        ("RUNNER_POD_IP", "not-an-ip"),
    ],
)
def test_a_bad_value_exits_2_with_one_error_naming_it(
    tmp_path: Path, mode: str, name: str, value: str
) -> None:
    env = operator_env(tmp_path, mode=mode, port=new_port(), bundle_index=None)
    env[name] = value
    result = subprocess.run(
        [sys.executable, "-m", "agent_runtime.launcher"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == EXIT_BAD_CONFIG
    records = [json.loads(line) for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    [error] = [record for record in records if record["level"] == "ERROR"]
    assert name in error["message"] and repr(value) in error["message"]
    assert "traceback" not in error
