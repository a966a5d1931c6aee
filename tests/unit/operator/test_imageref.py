from __future__ import annotations

import pytest

from agent_operator.imageref import image_reference_problem


@pytest.mark.parametrize(
    "image",
    [
        "busybox",
        "registry.example.com/team/agent:1.4.2",
        "localhost:5000/a/b/c:latest",
        "ghcr.io/org/agent@sha256:" + "a" * 64,
        "ghcr.io/org/agent:v1@sha256:" + "0" * 64,
        "[::1]:5000/agent:1",
    ],
)
def test_valid_references(image: str) -> None:
    assert image_reference_problem(image) is None


@pytest.mark.parametrize(
    "image", ["", " busybox", "UPPER/case", "a:b:c", "agent:", "agent@sha256:short", "a//b"]
)
def test_invalid_references(image: str) -> None:
    assert image_reference_problem(image) is not None
