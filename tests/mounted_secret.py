"""A Secret key laid out as the kubelet mounts it: a rotation in a test changes files as a pod sees them.

`<dir>/<key>` is a link to `..data/<key>`; `..data` links to a timestamped directory, and an update writes a
new directory and swaps the `..data` link in one rename (the kubelet's AtomicWriter).
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def mount_secret_key(directory: Path, value: str, *, key: str = "token") -> Path:
    """Write (or rotate to) `value` under `directory`, atomically; returns the path a pod reads."""
    directory.mkdir(parents=True, exist_ok=True)
    generation = directory / f"..{time.time_ns()}"
    generation.mkdir()
    (generation / key).write_text(value, encoding="utf-8")
    link = directory / "..data_tmp"
    link.symlink_to(generation.name)
    os.replace(link, directory / "..data")
    path = directory / key
    if not path.is_symlink():
        path.symlink_to(f"..data/{key}")
    return path
