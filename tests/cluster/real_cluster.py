"""The real-node tier's control plane (one KWOK node and one real node, the project's images built), shared
by tests/cluster/test_real_node.py and tests/chaos."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.controlplane import ControlPlane, ensure_binaries
from tests.cluster.realnode import RealNode, build_images, missing_prerequisites, placement_annotations
from tests.install_flow import Kube, Platform


@contextlib.contextmanager
def real_node_plane() -> Iterator[tuple[ControlPlane, Path]]:
    """The started control plane and the images' archive directory; skips where a real node cannot run."""
    bin_dir = ensure_binaries(echo=True, real_node=True)
    if missing := missing_prerequisites(bin_dir):
        pytest.skip(f"a real node needs {', '.join(missing)}")
    archives = build_images(echo=True)
    plane = ControlPlane(bin_dir=bin_dir, nodes=1, real_node=True)
    plane.start()
    try:
        yield plane, archives
    finally:
        plane.stop()


def node_platform(
    plane: ControlPlane, archives: Path, node: RealNode, *, name: str = "real node"
) -> Platform:
    """A `Platform` whose images are loaded into the real node and whose namespaces' pods run there."""
    return Platform(
        name="real node",
        kube=Kube(bin_dir=plane.bin_dir, env=plane.env()),
        load_images=lambda refs: node.load_project_images(archives, refs),
        namespace_annotations=placement_annotations(),
        enable_network_policies=node.enable_network_policies,
    )
