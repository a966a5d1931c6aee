"""Which files of the agent's directory changed: a snapshot of (mtime, size) per source file, compared."""

from __future__ import annotations

from pathlib import Path

from agent_runtime.devloop.project import WATCHED_SUFFIXES

Snapshot = dict[str, tuple[int, int]]
_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".venv", "node_modules", ".mypy_cache", ".pytest_cache"})


def snapshot(directory: Path) -> Snapshot:
    """Every watched file under `directory` (relative path -> (mtime_ns, size))."""
    out: Snapshot = {}
    for path in directory.rglob("*"):
        relative = path.relative_to(directory)
        if _SKIPPED_DIRS.intersection(relative.parts) or any(p.startswith(".") for p in relative.parts):
            continue
        if path.suffix not in WATCHED_SUFFIXES or not path.is_file():
            continue
        try:
            stat = path.stat()
        except OSError:
            continue
        out[str(relative)] = (stat.st_mtime_ns, stat.st_size)
    return out


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    """The files added, removed or modified between two snapshots, sorted."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
