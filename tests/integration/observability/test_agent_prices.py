"""An Agent's own prices (spec.pricing, issue 33): the operator carries them into the registration the OE
reads, and a real turn's cost (the audit's per step, the execution's sum, the cost metric) is priced by
them before the chart's table (OE_PRICES), in the Agent's currency.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent_operator.models import Agent
from agent_operator.registration import render_registration
from agent_operator.settings import RenderSettings
from agent_runtime.oe.registration import REGISTRATION_KEY
from tests.conftest import Process
from tests.integration.observability.harness import ObservedPlatform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import RunningLLMPeer, Turn
from tests.unit.operator.specimens import agent_body

pytestmark = pytest.mark.integration

CHART_PRICES = {"currency": "USD", "models": {"loop-model": {"input": 2.0, "output": 8.0}}}
AGENT_PRICING = {"currency": "EUR", "models": {"loop-model": {"input": 30.0, "output": 120.0, "cached": 3.0}}}


def _registered_prices() -> dict[str, Any]:
    """spec.pricing as the operator publishes it: the registration Secret's `prices`, decoded."""
    agent = Agent.from_body(agent_body("loop", pricing=AGENT_PRICING))
    secret = render_registration(agent, token="unused", settings=RenderSettings())
    document = json.loads(base64.b64decode(secret["data"][REGISTRATION_KEY]))
    return dict(document["prices"])


@pytest.fixture
def platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer
) -> Iterator[ObservedPlatform]:
    with running_echo_provider() as provider:
        yield ObservedPlatform(
            tmp=tmp_path,
            spawn=spawn,
            llm_base_url=llm_peer.base_url,
            provider_url=provider.url,
            registration={"prices": _registered_prices()},
            observe={"OE_PRICES": json.dumps(CHART_PRICES)},
        ).start()


def test_a_turns_cost_uses_the_agents_prices_before_the_charts(
    platform: ObservedPlatform, llm_peer: RunningLLMPeer
) -> None:
    llm_peer.push(Turn.calls(("shout", {"text": "hi"})), Turn.answer("done"))
    execution_id = platform.invoke({"mode": "llm", "text": "shout hi"})
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    usage = view["usage"]
    assert usage["model_steps"] == 2 and usage["unpriced_steps"] == 0
    assert usage["currency"] == "EUR"
    fresh = usage["input_tokens"] - usage["cached_tokens"]
    agents = (fresh * 30.0 + usage["cached_tokens"] * 3.0 + usage["output_tokens"] * 120.0) / 1_000_000
    charts = (usage["input_tokens"] * 2.0 + usage["output_tokens"] * 8.0) / 1_000_000
    assert usage["cost"] == pytest.approx(agents) and usage["cost"] != pytest.approx(charts)
    steps = [r for r in platform.audit(execution_id) if r["kind"] == "llm"]
    assert sum(r["cost"] for r in steps) == pytest.approx(agents)
    text = httpx.get(f"{platform.oe_url}/metrics").text
    metric = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "agent_engine_cost_total" and sample.labels.get("agent") == "loop"
    ]
    assert sum(metric) == pytest.approx(agents)
