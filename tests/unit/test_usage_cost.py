"""Token usage and cost (agent_runtime.oe.usage): pure functions the OE and the policy limits use."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_runtime.oe.usage import ModelPrice, PriceTable, Usage, cost, total, usage_of

pytestmark = pytest.mark.unit

PRICES = PriceTable(
    models={
        "gpt-x": ModelPrice(input=2.0, output=8.0, cached=0.5),
        "cheap": ModelPrice(input=0.1, output=0.4),
    }
)


def test_cost_bills_cached_input_at_the_cached_price() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, cached_tokens=400_000)
    # 600k fresh input at 2.0, 400k cached at 0.5, 500k output at 8.0
    assert cost(usage, "gpt-x", PRICES) == pytest.approx(1.2 + 0.2 + 4.0)


def test_cached_price_defaults_to_the_input_price() -> None:
    usage = Usage(input_tokens=2_000_000, output_tokens=0, cached_tokens=1_000_000)
    assert cost(usage, "cheap", PRICES) == pytest.approx(0.2)


def test_an_unpriced_model_costs_nothing_known_but_a_default_entry_prices_it() -> None:
    usage = Usage(input_tokens=10, output_tokens=10)
    assert cost(usage, "other", PRICES) is None
    assert cost(usage, None, PRICES) is None
    with_default = PRICES.overridden_by(PriceTable(models={"*": ModelPrice(input=1.0, output=1.0)}))
    assert cost(usage, "other", with_default) == pytest.approx(20 / 1_000_000)
    assert cost(usage, "gpt-x", with_default) == pytest.approx((10 * 2.0 + 10 * 8.0) / 1_000_000)


def test_an_agent_override_wins_over_the_chart_table() -> None:
    agent = PriceTable(models={"gpt-x": ModelPrice(input=0.0, output=0.0)})
    assert cost(Usage(input_tokens=5, output_tokens=5), "gpt-x", PRICES.overridden_by(agent)) == 0.0


def test_cached_tokens_above_the_input_count_are_capped() -> None:
    usage = Usage(input_tokens=10, output_tokens=0, cached_tokens=50)
    assert cost(usage, "gpt-x", PRICES) == pytest.approx(10 * 0.5 / 1_000_000)


def test_usage_of_reads_langchain_usage_metadata() -> None:
    metadata = {
        "input_tokens": 120,
        "output_tokens": 30,
        "total_tokens": 150,
        "input_token_details": {"cache_read": 100},
    }
    assert usage_of(metadata) == Usage(input_tokens=120, output_tokens=30, cached_tokens=100)
    assert usage_of(None) is None
    assert usage_of({"total_tokens": 3}) is None
    assert usage_of({"input_tokens": True, "output_tokens": -1}) is None
    assert usage_of({"input_tokens": 4, "output_tokens": "x"}) == Usage(input_tokens=4)


def test_total_sums_steps_and_skips_those_without_usage() -> None:
    steps = [Usage(input_tokens=1, output_tokens=2, cached_tokens=1), None, Usage(input_tokens=3)]
    assert total(steps) == Usage(input_tokens=4, output_tokens=2, cached_tokens=1)
    assert total([]).total_tokens == 0


def test_bad_prices_name_the_field() -> None:
    with pytest.raises(ValidationError, match="input"):
        PriceTable.model_validate({"models": {"m": {"input": -1, "output": 1}}})
    with pytest.raises(ValidationError, match="currency"):
        PriceTable.model_validate({"currency": " "})


def test_the_audit_keeps_token_usage_and_still_masks_tokens() -> None:
    from agent_runtime.oe.audit import audit_value

    message = {
        "usage_metadata": {"input_tokens": 3, "output_tokens": 4, "input_token_details": {"cache_read": 1}},
        "response_metadata": {
            "token_usage": {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 1}}
        },
        "access_token": "abc",
        "api_key": "k",
    }
    kept = audit_value(message, secrets=())
    assert kept["usage_metadata"] == message["usage_metadata"]
    assert kept["response_metadata"]["token_usage"] == message["response_metadata"]["token_usage"]
    assert kept["access_token"] == "[REDACTED]" and kept["api_key"] == "[REDACTED]"


def test_usage_view_counts_each_model_step_once() -> None:
    from agent_runtime.oe.store.base import AuditRecord
    from agent_runtime.oe.usage_report import usage_view

    def record(step: int, *, decision: str = "allow", from_cache: bool = False, cost: float | None = 0.5):
        return AuditRecord(
            execution_id="e",
            step=step,
            agent="a/b",
            workspace_id="a.b",
            kind="llm",
            decision=decision,
            from_cache=from_cache,
            usage=Usage(input_tokens=10, output_tokens=5),
            model="m",
            cost=cost,
            at=1.0,
        )

    records = [record(1), record(1, decision="joined"), record(2, from_cache=True), record(3, cost=None)]
    view = usage_view(records, currency="EUR")
    assert view is not None
    assert (view["input_tokens"], view["output_tokens"], view["model_steps"]) == (20, 10, 2)
    assert view["cost"] == 0.5 and view["unpriced_steps"] == 1 and view["currency"] == "EUR"
    assert usage_view([], currency="USD") is None


def test_prices_from_env_names_the_field() -> None:
    from agent_runtime.oe.usage import prices_from_env

    table = prices_from_env({"OE_PRICES": '{"models": {"m": {"input": 1, "output": 2}}}'})
    assert table.price_of("m") == ModelPrice(input=1, output=2)
    assert prices_from_env({}).models == {}
    with pytest.raises(ValueError, match=r"OE_PRICES: models\.m\.output"):
        prices_from_env({"OE_PRICES": '{"models": {"m": {"input": 1}}}'})


def test_price_resolution_takes_the_agents_table_before_the_charts() -> None:
    """spec.pricing over the chart's OE_PRICES: the Agent's named model first, then the chart's named
    model, then the Agent's "*", then the chart's "*"; the Agent's currency is the table's."""
    chart = PriceTable(
        models={
            "gpt-x": ModelPrice(input=2.0, output=8.0),
            "named-by-chart": ModelPrice(input=3.0, output=3.0),
            "*": ModelPrice(input=9.0, output=9.0),
        }
    )
    agent = PriceTable(
        currency="EUR",
        models={
            "gpt-x": ModelPrice(input=1.0, output=4.0, cached=0.25),
            "*": ModelPrice(input=5.0, output=5.0),
        },
    )
    table = chart.overridden_by(agent)
    assert table.currency == "EUR"
    assert table.price_of("gpt-x") == ModelPrice(input=1.0, output=4.0, cached=0.25)
    assert table.price_of("named-by-chart") == ModelPrice(input=3.0, output=3.0)
    assert table.price_of("unnamed") == ModelPrice(input=5.0, output=5.0)
    assert chart.overridden_by(None).price_of("unnamed") == ModelPrice(input=9.0, output=9.0)
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cached_tokens=1_000_000)
    assert cost(usage, "gpt-x", table) == pytest.approx(0.25 + 4.0)
    assert cost(usage, "gpt-x", chart) == pytest.approx(2.0 + 8.0)
