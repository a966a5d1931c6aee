"""Record what a real API server stores for rendered objects: `python -m tests.cluster.record_live`.

Applies the memory golden Agent's children (tests/unit/operator/test_render.py) to a fresh control plane and
writes each rendered manifest with the object as stored (without managedFields) to
tests/unit/operator/live/memory_agent.json: the drift unit tests judge the stored objects against the
renderings recorded with them, so a later rendering change does not touch them. Rerun after a Kubernetes
upgrade, or to cover a new kind of field.
"""

from __future__ import annotations

import json
import sys

from agent_operator.kube import object_path
from tests.cluster.controlplane import ControlPlane, ensure_binaries
from tests.cluster.operator_harness import Api
from tests.conftest import REPO_ROOT
from tests.unit.operator.test_render import _memory_inputs_kwargs, _plan

TARGET = REPO_ROOT / "tests" / "unit" / "operator" / "live" / "memory_agent.json"


def main() -> int:
    plan = _plan(**_memory_inputs_kwargs())
    stored = {}
    with ControlPlane(bin_dir=ensure_binaries(), nodes=1) as plane:
        plane.kubectl("create", "namespace", "team-a")
        api = Api.connect(plane, "team-a")
        for desired in plan.objects:
            if desired.create_only:
                continue
            manifest = dict(desired.manifest)
            # No Agent exists to own them here.
            manifest["metadata"] = {k: v for k, v in manifest["metadata"].items() if k != "ownerReferences"}
            api_version, kind, name = desired.key
            response = api.http.patch(
                object_path(api_version, kind, "team-a", name),
                params={"fieldManager": "record", "force": "true"},
                content=json.dumps(manifest),
                headers={"Content-Type": "application/apply-patch+yaml"},
            )
            response.raise_for_status()
            body = response.json()
            body["metadata"].pop("managedFields", None)
            stored[f"{kind}/{name}"] = {"rendered": manifest, "stored": body}
        api.http.close()
    TARGET.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
    print(f"{TARGET}: {len(stored)} objects")
    return 0


if __name__ == "__main__":
    sys.exit(main())
