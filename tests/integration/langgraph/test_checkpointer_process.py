"""A process with an open SQLite checkpoint connection still exits (aiosqlite's thread is not a daemon)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

SCRIPT = """
import asyncio, sys
from agent_runtime.langgraph import PlatformCheckpointer, checkpoint_settings

async def main():
    saver = PlatformCheckpointer.from_settings(
        checkpoint_settings({"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": sys.argv[1]})
    )
    await saver.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})

asyncio.run(main())
"""


def test_an_open_sqlite_checkpointer_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "cp.sqlite3")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cp.sqlite3").exists()
