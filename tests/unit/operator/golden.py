"""Golden files: rendered objects vs tests/unit/operator/golden/*.yaml (UPDATE_GOLDEN=1 rewrites)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

GOLDEN_DIR = Path(__file__).parent / "golden"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (bundle files) as literal blocks, so a golden diff reads like the file."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def assert_golden(name: str, documents: list[dict[str, Any]]) -> None:
    text = yaml.dump_all(documents, Dumper=_Dumper, sort_keys=True, width=120)
    path = GOLDEN_DIR / f"{name}.yaml"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing; run with UPDATE_GOLDEN=1 to create it, then review the diff"
    expected = path.read_text()
    assert text == expected, (
        f"{path.name} differs from the rendering; if intended, rerun with UPDATE_GOLDEN=1"
    )
