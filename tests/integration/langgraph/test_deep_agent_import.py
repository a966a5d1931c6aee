"""Importing a deep agent's module touches no files path (LG-17): the root is the Tool Pod's, at its start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TENANT = Path(__file__).resolve().parent / "tenant"
REPO = Path(__file__).resolve().parents[3]


def test_importing_the_sdk_and_a_deep_agent_app_touches_no_files_root(tmp_path: Path) -> None:
    root = tmp_path / "files-root"
    env = {
        **os.environ,
        "PYTHONPATH": f"{TENANT}{os.pathsep}{REPO}",
        "DEEP_AGENT_FILES_ROOT": str(root),
        "LOOP_LEDGER": str(tmp_path / "ledger"),
    }
    code = (
        "import lg_deep, sys; "
        "tools = sorted(n for n in lg_deep.app.tools if n.startswith('files_')); print(','.join(tools)); "
        "from agent_runtime.langgraph.backends.tool_sandbox import files_root; "
        "print(files_root('x', env={'DEEP_AGENT_FILES_ROOT': sys.argv[1]}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "resolved")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    listed, resolved = done.stdout.split()
    operations = ("ls", "read", "write", "edit", "delete", "glob", "grep", "upload", "download")
    assert listed.split(",") == sorted(f"files_{op}" for op in operations)
    assert not root.exists()  # the import created nothing
    assert Path(resolved).is_dir()  # resolving (the Tool Pod's start-up build) does
