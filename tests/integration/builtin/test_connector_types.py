"""The OE's `GET /connector-types` (C-02): every registered type, its config schema, secrets and tools."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.conftest import Process, free_port

CLIENT_TOKEN = "client-token-types"


def test_the_oe_lists_connector_types_from_the_registry(
    tmp_path: Path, spawn: Callable[..., Process]
) -> None:
    port = free_port()
    (tmp_path / "registrations").mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "RUNNER_MODE": "oe",
        "APP_HOST": "127.0.0.1",
        "RUNTIME_PORT": str(port),
        "OE_SQLITE_PATH": str(tmp_path / "oe.sqlite3"),
        "OE_REGISTRATIONS_DIR": str(tmp_path / "registrations"),
        "OE_CLIENT_TOKEN": CLIENT_TOKEN,
    }
    proc = spawn([sys.executable, "-m", "agent_runtime.launcher"], env=env, name="oe")
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=0.5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert proc.popen.poll() is None and time.monotonic() < deadline, proc.output()
        time.sleep(0.05)
    assert httpx.get(f"{url}/connector-types").status_code == 401
    answer = httpx.get(f"{url}/connector-types", headers={"authorization": f"Bearer {CLIENT_TOKEN}"})
    assert answer.status_code == 200
    body = answer.json()
    types = {t["type"]: t for t in body["types"]}
    assert set(types) == {
        "http",
        "webhook",
        "knowledge",
        "postgres",
        "mysql",
        "email",
        "slack",
        "github",
        "notion",
        "stripe",
        "google",
        "mcp",
        "agent",
    }
    assert body["other_sources"] == ["openapi"]
    postgres = types["postgres"]
    assert postgres["config_schema"]["required"] == ["host", "database", "user"]
    assert postgres["secrets"] == [
        {"field": "password", "description": "the database user's password", "required": False}
    ]
    assert {t["name"]: t["sensitive"] for t in postgres["tools"]} == {
        "postgres.query": False,
        "postgres.execute": True,
    }
    assert {t["name"] for t in types["google"]["tools"]} == {
        "gsheets.read_range",
        "gsheets.append_row",
        "gdrive.list_files",
        "gdrive.get_file",
    }
