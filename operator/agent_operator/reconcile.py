"""The operator's decision, pure: an Agent, its Connectors, ConfigMaps and Secret metadata -> desired objects.

Bad input raises `InputProblem` before anything is rendered, so the apply layer applies all or nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from agent_operator.bundle import (
    BUNDLE,
    RenderedBundle,
    connector_ca_values,
    egress_endpoints,
    forbidden_address,
    materialize,
    render_bundle,
    url_problem,
)
from agent_operator.imageref import image_reference_problem
from agent_operator.inputs import (
    AgentInputs,
    Catalogs,
    InputProblem,
    component_secret_refs,
    connector_ca_env,
)
from agent_operator.mcp import oauth_connectors
from agent_operator.models import Agent, Connector
from agent_operator.notify_targets import notify_problem
from agent_operator.quantities import quantity
from agent_operator.render import COMPONENTS, Desired, enabled_components, render_objects, url_endpoint
from agent_operator.runtimes import DEFAULT_IMAGE_SOURCES, default_image, memory_image
from agent_operator.settings import RenderSettings
from agent_runtime.contract import Runtime
from agent_runtime.oe.policy import policy_problems

# Services are named `<agent>-<component>`: a DNS-1035 label, so no dots and a letter first.
AGENT_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")


@dataclass(frozen=True)
class Plan:
    """What the Agent should look like in the cluster."""

    objects: tuple[Desired, ...]
    bundle: RenderedBundle


@dataclass(frozen=True)
class ConnectorSummary:
    tool_count: int
    digest: str


def summarize_connector(
    inputs_connector: Connector,
    config_maps: Mapping[str, Mapping[str, str] | None],
    catalogs: Catalogs | None = None,
    *,
    allow_metadata_addresses: bool = False,
) -> ConnectorSummary:
    """A Connector on its own: does it compile, how many tools, which digest. Raises InputProblem."""
    definitions = materialize(
        inputs_connector, config_maps, catalogs, allow_metadata_addresses=allow_metadata_addresses
    )
    return ConnectorSummary(
        tool_count=len(definitions.tools), digest=hashlib.sha256(definitions.dumps().encode()).hexdigest()
    )


def plan_agent(inputs: AgentInputs, *, settings: RenderSettings) -> Plan:
    agent = inputs.agent
    if not AGENT_NAME.match(agent.meta.name):
        # The CRD refuses such names at admission; an Agent from before that rule still gets told.
        raise InputProblem(
            reason="NameInvalid",
            message=f"metadata.name {agent.meta.name!r} cannot name this Agent's Services: use at most 40 "
            "lowercase letters, digits and '-', starting with a letter and ending with a letter or digit, "
            "no dots; recreate the Agent under such a name, e.g. my-agent",
        )
    if agent.spec.llm.base_url and (problem := url_problem(agent.spec.llm.base_url)) is not None:
        raise InputProblem(
            reason="LlmBaseUrlInvalid",
            message=f"spec.llm.baseUrl {agent.spec.llm.base_url!r} is not usable: {problem}",
        )
    if agent.spec.llm.base_url and not settings.allow_metadata_addresses:
        where = f"spec.llm.baseUrl {agent.spec.llm.base_url!r}"
        host, _ = url_endpoint(agent.spec.llm.base_url)
        if problem := forbidden_address(where, host, reason="LlmBaseUrlForbidden", condition="Ready"):
            raise problem
    _check_components(agent)
    # Issue 34: every CEL condition compiles and type checks now, as the OE will compile it.
    for path, problem in policy_problems(agent.spec.tools):
        raise InputProblem(
            reason="PolicyConditionInvalid",
            message=f"spec.tools.{path} {problem}; fix the expression (CEL over tool, args, agent, user, "
            "step and usage)",
        )
    _check_notify(inputs, settings=settings)
    runtime = agent.spec.runtime
    image = agent.spec.image or default_image(runtime, settings)
    if image is None:
        raise InputProblem(
            reason="ImageInvalid",
            message=f"spec.image is not set and the operator has no default {runtime} runtime image; set "
            f"spec.image or {DEFAULT_IMAGE_SOURCES[runtime]}",
        )
    if problem := image_reference_problem(image):
        raise InputProblem(
            reason="ImageInvalid",
            message=f"spec.image {image!r} is not a valid image reference: {problem}; "
            "write e.g. registry.example.com/team/agent:1.0.0",
        )
    if agent.spec.image is None:
        agent = agent.model_copy(update={"spec": agent.spec.model_copy(update={"image": image})})
    if agent.spec.components.memory.enabled and memory_image(agent, settings) is None:
        raise InputProblem(
            reason="ImageInvalid",
            message="spec.components.memory.enabled with spec.runtime node: the Memory server is the "
            "platform's Python code, run from the operator's Python runtime image, and it has none; set "
            f"{DEFAULT_IMAGE_SOURCES[Runtime.PYTHON]} or disable spec.components.memory",
        )
    connectors: list[Connector] = []
    for name in agent.spec.connectors:
        connector = inputs.connectors.get(name)
        if connector is None:
            raise InputProblem(
                reason="ConnectorMissing",
                condition=BUNDLE,
                message=f"spec.connectors: Connector {name!r} does not exist in namespace "
                f"{agent.meta.namespace}; create it or remove it from the list",
            )
        connectors.append(connector)
    definitions = [
        materialize(
            c,
            inputs.config_maps,
            inputs.catalogs,
            allow_metadata_addresses=settings.allow_metadata_addresses,
        )
        for c in connectors
    ]
    _check_ca_secrets(inputs, connectors)
    _check_knowledge(inputs)
    ca_values = connector_ca_values(connectors, inputs.config_maps)

    secret_env = component_secret_refs(agent, inputs.connectors)
    versions: dict[str, str] = {}
    for component in enabled_components(agent):
        for env_name, ref in secret_env[component]:
            meta = inputs.secrets.get(ref.name)
            if meta is None:
                raise InputProblem(
                    reason="SecretMissing",
                    message=f"{component}: Secret {ref.name!r} (for {env_name}) does not exist in namespace "
                    f"{agent.meta.namespace}; create it or fix the reference",
                )
            if ref.key not in meta.keys:
                raise InputProblem(
                    reason="SecretKeyMissing",
                    message=f"{component}: Secret {ref.name!r} has no key {ref.key!r} (for {env_name}); "
                    f"add the key or fix secretKeyRef.key",
                )
            versions[ref.name] = meta.resource_version
        plain = [name for name, _ in ca_values] if component == "tool" else []
        _check_env_conflicts(inputs, component, [name for name, _ in secret_env[component]] + plain)

    bundle = render_bundle(
        connectors=definitions,
        budget_bytes=settings.configmap_budget_bytes,
        max_parts=settings.max_bundle_configmaps,
    )
    objects = render_objects(
        agent=agent,
        bundle=bundle,
        secret_env=secret_env,
        secret_versions=versions,
        tool_env=ca_values,
        mcp_oauth=oauth_connectors(definitions),
        provider_endpoints=sorted(
            {url_endpoint(c.spec.source.base_url) for c in connectors if c.spec.source.base_url}
            | set(egress_endpoints(definitions))
        ),
        settings=settings,
    )
    return Plan(objects=tuple(objects), bundle=bundle)


def _check_components(agent: Agent) -> None:
    """What the CRD refuses at admission, for an Agent stored before those rules: a request above its
    limit (the API server would refuse that component's Deployment alone, half-applying the Agent) and a
    sqlite Memory with several pods (each would get its own file)."""
    for component in COMPONENTS:
        resources = getattr(agent.spec.components, component).resources
        for resource, request in sorted(resources.requests.items()):
            limit = resources.limits.get(resource)
            if limit is None:
                continue
            wanted, allowed = quantity(request), quantity(limit)
            if wanted is not None and allowed is not None and wanted > allowed:
                raise InputProblem(
                    reason="ResourcesInvalid",
                    message=f"spec.components.{component}.resources.requests.{resource} {request} is above "
                    f"resources.limits.{resource} {limit}; lower the request or raise the limit",
                )
    memory = agent.spec.components.memory
    if memory.enabled and memory.store.type == "sqlite" and memory.replicas > 1:
        raise InputProblem(
            reason="MemoryReplicasInvalid",
            message=f"spec.components.memory.replicas {memory.replicas} with store.type sqlite: each Memory "
            "pod would keep its own file, so the agent's memories would depend on the pod answering; set "
            "replicas to 1 or use store.type mongodb",
        )


def _check_env_conflicts(inputs: AgentInputs, component: str, secret_names: list[str]) -> None:
    plain = [e.name for e in getattr(inputs.agent.spec.components, component).env]
    duplicated = sorted(n for n, count in Counter([*plain, *secret_names]).items() if count > 1)
    if duplicated:
        raise InputProblem(
            reason="EnvConflict",
            message=f"{component}: environment variables {duplicated} are set twice (component env, "
            "secretEnv, llm.credentials or a Connector's auth.env); give each a distinct name",
        )


def _check_ca_secrets(inputs: AgentInputs, connectors: list[Connector]) -> None:
    """A spec.tls.caSecretKeyRef that names no Secret or key: reported on the Connector's field."""
    for connector in connectors:
        ref = connector.spec.tls.ca_secret_key_ref if connector.spec.tls else None
        if ref is None:
            continue
        where = f"Connector {connector.meta.name}: spec.tls.caSecretKeyRef"
        meta = inputs.secrets.get(ref.name)
        if meta is None:
            raise InputProblem(
                reason="CaMissing",
                condition=BUNDLE,
                message=f"{where}.name: Secret {ref.name!r} does not exist in namespace "
                f"{inputs.agent.meta.namespace}; create it or fix the name",
            )
        if ref.key not in meta.keys:
            raise InputProblem(
                reason="CaKeyMissing",
                condition=BUNDLE,
                message=f"{where}.key: Secret {ref.name!r} has no key {ref.key!r} (for "
                f"{connector_ca_env(connector.meta.name)}); add the key or fix the reference",
            )


def _check_knowledge(inputs: AgentInputs) -> None:
    """A spec.knowledge entry whose ConfigMap or Secret is not there: the kubelet would hold the Tool Pod
    in ContainerCreating saying nothing on the Agent, so it is refused here, naming the entry."""
    namespace = inputs.agent.meta.namespace
    for n, entry in enumerate(inputs.agent.spec.knowledge):
        where = f"spec.knowledge[{n}] ({entry.name})"
        cm, secret = entry.config_map_name, entry.secret_name
        if cm and inputs.config_maps.get(cm) is None:
            raise InputProblem(
                reason="KnowledgeMissing",
                message=f"{where}: ConfigMap {cm!r} does not exist in namespace {namespace}; create it "
                f"(kubectl create configmap {cm} --from-file=DIR -n {namespace}) or fix "
                f"spec.knowledge[{n}].configMapName",
            )
        if secret and inputs.secrets.get(secret) is None:
            raise InputProblem(
                reason="KnowledgeMissing",
                message=f"{where}: Secret {secret!r} does not exist in namespace {namespace}; create it "
                f"(kubectl create secret generic {secret} --from-file=DIR -n {namespace}) or fix "
                f"spec.knowledge[{n}].secretName",
            )


def _check_notify(inputs: AgentInputs, *, settings: RenderSettings) -> None:
    """spec.notify (issue 34): each webhook URL usable and allowed, each Secret and slack Connector there."""
    for n, target in enumerate(inputs.agent.spec.notify):
        if target.type != "webhook" or not target.url:
            continue
        where = f"spec.notify[{n}].url {target.url!r}"
        if (problem := url_problem(target.url)) is not None:
            raise InputProblem(reason="NotifyUrlInvalid", message=f"{where} is not usable: {problem}")
        if not settings.allow_metadata_addresses:
            host, _ = url_endpoint(target.url)
            if refused := forbidden_address(where, host, reason="NotifyUrlForbidden", condition="Ready"):
                raise refused
    keys = {name: (meta.keys if meta is not None else None) for name, meta in inputs.secrets.items()}
    if (found := notify_problem(inputs.agent, inputs.connectors, keys)) is not None:
        raise InputProblem(reason=found[0], message=found[1])
