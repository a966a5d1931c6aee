"""The CRDs parse the same for the API server as for Python: in a flow mapping (`{type: ..., description:
...}`) an unquoted description holding a comma is cut there by Kubernetes' YAML parser, the rest becoming a
key (`onLimit queue).`) the API server refuses when the CRD is applied ("field not declared in schema"),
while PyYAML reads one string. So such a description is quoted; caught here, before a cluster test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

# A flow mapping's plain (unquoted) description that holds ", ".
UNQUOTED_COMMA = re.compile(r"\{[^\n]*\bdescription: (?![\"'])[^\n}]*, ")


@pytest.mark.parametrize(
    "crd",
    sorted([*(REPO_ROOT / "crds").glob("*.yaml"), *(REPO_ROOT / "charts").glob("*/crds/*.yaml")]),
    ids=lambda p: str(p.relative_to(REPO_ROOT)),
)
def test_no_flow_mapping_description_is_cut_by_a_comma(crd: Path) -> None:
    bad = [
        f"line {n}: {line.strip()[:100]}"
        for n, line in enumerate(crd.read_text().splitlines(), start=1)
        if UNQUOTED_COMMA.search(line)
    ]
    assert bad == [], f"{crd.name}: quote these descriptions: {bad}"
