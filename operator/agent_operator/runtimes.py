"""Which image and command each component of an Agent runs, by its `spec.runtime` (pure).

The AER and the Tool Pod run the tenant's image with its runtime's launcher: `python -m
agent_runtime.launcher` or `node /opt/agent-engine/runner/launcher.js` (contract.IMAGE_COMMANDS). The Memory
server is the platform's Python code whatever the Agent's runtime: a Python Agent's image holds it (it is
built FROM the runtime image), a Node Agent's image does not, so a Node Agent's Memory pod runs the
platform's Python runtime image.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_operator.models import Agent
from agent_operator.settings import RenderSettings
from agent_runtime.contract import IMAGE_COMMANDS, Runtime

# The Helm value and operator variable that name each runtime's default image (errors quote them).
DEFAULT_IMAGE_SOURCES = {
    Runtime.PYTHON: "the Helm value image.runtime (AGENT_OPERATOR_DEFAULT_IMAGE)",
    Runtime.NODE: "the Helm value image.nodeRuntime (AGENT_OPERATOR_DEFAULT_NODE_IMAGE)",
}


@dataclass(frozen=True)
class ContainerRun:
    """One component's container image and command."""

    image: str
    command: tuple[str, ...]


def default_image(runtime: Runtime, settings: RenderSettings) -> str | None:
    """The image an Agent of `runtime` that names none runs: the platform's runtime image for it."""
    return settings.default_node_image if runtime == Runtime.NODE else settings.default_image


def memory_image(agent: Agent, settings: RenderSettings) -> str | None:
    """The Memory server's image: the Agent's own for Python, the platform's Python image for Node."""
    return settings.default_image if agent.spec.runtime == Runtime.NODE else agent.spec.image


def container_run(agent: Agent, component: str, settings: RenderSettings) -> ContainerRun:
    """The image and command of `component` (reconcile has resolved spec.image and checked memory's)."""
    if component == "memory":
        image = memory_image(agent, settings)
        assert image is not None, "reconcile refuses a Node Agent's Memory without a Python runtime image"
        return ContainerRun(image=image, command=IMAGE_COMMANDS[Runtime.PYTHON])
    assert agent.spec.image is not None, "reconcile resolves spec.image before rendering"
    return ContainerRun(image=agent.spec.image, command=IMAGE_COMMANDS[agent.spec.runtime])
