"""Measuring a benchmark child process: its wall time and its own peak RSS (wait4 rusage, ru_maxrss)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CACHE_DIR = Path.home() / ".cache" / "agent-engine"

# A tiny parent between us and the measured child: wait4 gives exactly that child's rusage, unaffected by
# whatever other children this benchmark process has had (RUSAGE_CHILDREN would be their maximum).
_WRAPPER = """
import json, os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)
out = child.stdout.read()
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - started
lines = [line for line in out.splitlines() if line.startswith("{")]
report = json.loads(lines[-1]) if lines else {}
report.update(wall_s=wall, peak_rss_mb=usage.ru_maxrss / 1024)
print(json.dumps(report))
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass(frozen=True)
class ChildRun:
    wall_s: float
    peak_rss_mb: float
    report: dict[str, Any]


def run_measured(argv: list[str], *, cwd: Path | None = None, timeout_s: float = 900.0) -> ChildRun:
    """Run argv to completion; it prints a JSON object as its last `{` line, which we return with figures."""
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    report = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    return ChildRun(wall_s=float(report["wall_s"]), peak_rss_mb=float(report["peak_rss_mb"]), report=report)


def ensure_venv(name: str, requirements: list[str]) -> Path:
    """A separate venv under ~/.cache/agent-engine for a peer measured in the same run (not a dependency)."""
    venv = CACHE_DIR / name
    python = venv / "bin" / "python"
    marker = venv / ".requirements"
    wanted = "\n".join(requirements)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(f"installing {', '.join(requirements)} into {venv} ...", flush=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
        check=True,
        env={**os.environ, "PIP_NO_INPUT": "1"},
    )
    marker.write_text(wanted)
    return python
