"""Fixtures of the cluster tier: one real control plane per test session (see tests/cluster/controlplane.py).

cluster            the session's ControlPlane (kubeconfig, server, bin_dir, env(), api_client(), ...)
cluster_namespace  a fresh namespace for one test, deleted afterwards
crds, api, start_operator  the operator under test (tests/cluster/operator_harness.py)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.controlplane import ControlPlane, ControlPlaneError, ensure_binaries, wait_until

# The operator's fixtures (crds, api, start_operator) live with their helpers.
from tests.cluster.operator_harness import api, crds, start_operator  # noqa: F401

_HERE = Path(__file__).resolve().parent
_build_error: ControlPlaneError | None = None
_bin_dir: Path | None = None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build missing binaries before any test runs, so the per-test timeout does not cut a cold build."""
    global _bin_dir, _build_error
    if session.config.option.collectonly:
        return
    if not any(_HERE in Path(str(item.fspath)).resolve().parents for item in session.items):
        return
    try:
        _bin_dir = ensure_binaries(echo=True)
    except ControlPlaneError as error:
        _build_error = error


@pytest.fixture(scope="session")
def cluster() -> Iterator[ControlPlane]:
    """A running control plane with two Ready fake nodes, shared by the whole session."""
    if _build_error is not None:
        raise _build_error
    plane = ControlPlane(bin_dir=_bin_dir or ensure_binaries(), nodes=2)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def cluster_namespace(cluster: ControlPlane) -> Iterator[str]:
    """A namespace of its own for one test; deleted (not waited for) afterwards."""
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:10]}"
    with cluster.api_client() as admin:
        core = client.CoreV1Api(admin)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        # Pods are refused until the ServiceAccount controller made the namespace's `default` account.
        wait_until(
            f"ServiceAccount {name}/default",
            lambda: any(
                sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items
            ),
            interval=0.05,
        )
    yield name
    with cluster.api_client() as admin:
        client.CoreV1Api(admin).delete_namespace(name)
