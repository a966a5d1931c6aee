"""The kind tier: a real cluster in Docker, real images. Run with `make e2e-kind` (needs Docker and kind).

KIND_BIN, KUBECTL_BIN_DIR (kubectl and helm) come from the Makefile; E2E_KEEP_CLUSTER=1 keeps the cluster.
The journey is tests/install_flow.py's, the one the real-node tier (tests/cluster/test_real_node.py) runs;
only how images reach the nodes differs: `docker build` of the same Dockerfiles, then `kind load`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.install_flow import PROJECT_IMAGES, REPO_ROOT, VERSION, Kube, Platform


def _run(*argv: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(argv, check=True, env=env, cwd=REPO_ROOT, timeout=1800)


@pytest.fixture(scope="session")
def kind_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.skip("the kind tier needs a running Docker engine")
    kind = os.environ.get("KIND_BIN") or shutil.which("kind")
    bin_dir = os.environ.get("KUBECTL_BIN_DIR")
    if not kind or not bin_dir:
        pytest.skip("run through `make e2e-kind`, which provides kind, kubectl and helm")
    name = f"agent-engine-e2e-{uuid.uuid4().hex[:6]}"
    kubeconfig = tmp_path_factory.mktemp("kind") / "kubeconfig"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    for repository, (dockerfile, context) in PROJECT_IMAGES.items():
        _run("docker", "build", "-f", dockerfile, "-t", f"{repository}:{VERSION}", context)
    _run(kind, "create", "cluster", "--name", name, "--kubeconfig", str(kubeconfig), "--wait", "120s")

    def load_images(refs: Sequence[str]) -> None:
        for ref in refs:
            _run(kind, "load", "docker-image", ref, "--name", name)

    try:
        # kind's own CNI (kindnet) enforces NetworkPolicies from the start; its nodes expose no cgroups to us.
        yield Platform(name="kind", kube=Kube(bin_dir=Path(bin_dir), env=env), load_images=load_images)
    finally:
        if os.environ.get("E2E_KEEP_CLUSTER") != "1":
            _run(kind, "delete", "cluster", "--name", name)
