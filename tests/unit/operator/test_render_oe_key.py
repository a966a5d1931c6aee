"""The OE's public key reaches every component of an Agent, and nothing secret comes with it (issue 27)."""

from __future__ import annotations

from agent_operator.reconcile import plan_agent
from agent_operator.render import oe_public_key_config_map_name
from agent_operator.settings import OperatorSettings, RenderSettings
from agent_operator.shared import held_by_workloads
from agent_runtime import contract
from agent_runtime.execution_token import generate_private_key_pem, public_key_pem
from tests.unit.operator.specimens import agent_body, inputs

PUBLIC = public_key_pem(generate_private_key_pem())


def test_every_component_mounts_the_oe_public_key_from_one_shared_configmap() -> None:
    plan = plan_agent(inputs(agent=agent_body()), settings=RenderSettings(oe_public_key=PUBLIC))
    name = oe_public_key_config_map_name(PUBLIC)
    maps = [d for d in plan.objects if d.manifest["metadata"]["name"] == name]
    # Shared, immutable and created once (the operator may not patch ConfigMaps): a new key, a new name.
    assert len(maps) == 1 and maps[0].shared and maps[0].create_only and maps[0].manifest["immutable"]
    assert maps[0].manifest["data"] == {contract.OE_PUBLIC_KEY_KEY: PUBLIC}
    assert oe_public_key_config_map_name(public_key_pem(generate_private_key_pem())) != name
    assert "PRIVATE" not in str(plan.objects)
    deployments = [d.manifest for d in plan.objects if d.manifest["kind"] == "Deployment"]
    assert deployments
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env[contract.OE_PUBLIC_KEY_FILE_ENV] == contract.OE_PUBLIC_KEY_PATH
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts["oe-public-key"] == {
            "name": "oe-public-key",
            "mountPath": contract.OE_PUBLIC_KEY_MOUNT_DIR,
            "readOnly": True,
        }
        volumes = {v["name"]: v for v in pod["volumes"]}
        # Projected like the bundle, so pods of an older ReplicaSet keep the ConfigMap they mount.
        assert volumes["oe-public-key"]["projected"]["sources"] == [{"configMap": {"name": name}}]
        assert held_by_workloads([{"spec": {"replicas": 1, "template": {"spec": pod}}}]) >= {
            ("ConfigMap", name)
        }


def test_without_a_key_nothing_is_rendered_and_the_setting_reads_the_file(tmp_path) -> None:
    plan = plan_agent(inputs(agent=agent_body()), settings=RenderSettings())
    assert contract.OE_PUBLIC_KEY_CONFIGMAP not in str(plan.objects)
    path = tmp_path / "public-key.pem"
    path.write_text(PUBLIC)
    settings = OperatorSettings.from_env({"AGENT_OPERATOR_OE_PUBLIC_KEY_FILE": str(path)})
    assert settings.render.oe_public_key.strip() == PUBLIC.strip()
